import AmpelCore

/// The four lights of an Ampel lamp: the three traffic colours and a blue status light.
///
/// Blue is never the colour of a phase, so every state that is not a trustworthy phase
/// (no signal yet, Ampel offline, stale data, outside the region) is shown in blue and
/// cannot be read as green, yellow or red.
public struct LampLights: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let red = LampLights(rawValue: 1 << 0)
    public static let yellow = LampLights(rawValue: 1 << 1)
    public static let green = LampLights(rawValue: 1 << 2)
    public static let blue = LampLights(rawValue: 1 << 3)

    public static let all: LampLights = [.red, .yellow, .green, .blue]

    /// Top to bottom, the order of the lamp test and of names in the JSON line.
    public static let ordered: [LampLights] = [.red, .yellow, .green, .blue]

    /// The name of a single light: `red`, `yellow`, `green` or `blue`.
    public var name: StaticString {
        switch self {
        case .red: "red"
        case .yellow: "yellow"
        case .green: "green"
        case .blue: "blue"
        default: "mixed"
        }
    }
}

/// Why the lamp shows "no signal" instead of a phase.
public enum NoSignalReason: UInt8, Sendable, Hashable {
    /// Nothing valid received since power-on.
    case waiting = 0
    /// `ampel/bridge/state` says offline, or the lamp lost its broker connection.
    case offline = 1
    /// The signal says its incidence data is stale.
    case stale = 2

    public var name: StaticString {
        switch self {
        case .waiting: "waiting"
        case .offline: "offline"
        case .stale: "stale"
        }
    }
}

/// What the lamp shows: a small value that changes only when the meaning changes.
///
/// Blinking is part of the pattern, not a change of it: ``frame(elapsed:)`` turns a pattern
/// and the time since it began into the lights that are on at that moment.
///
/// | pattern | lights |
/// |---|---|
/// | ``phase(_:)`` green, yellow, red | that light, steady |
/// | ``phase(_:)`` darkred | red, blinking at 1 Hz (500 ms on, 500 ms off) |
/// | ``outside`` | blue, steady |
/// | ``noSignal(_:)`` | blue, blinking at 0.5 Hz (1 s on, 1 s off) |
/// | ``lampTest`` | red, yellow, green, blue, 400 ms each, once |
public enum LampPattern: Sendable, Hashable {
    /// The power-on self test: each light in turn.
    case lampTest
    /// A phase: the colour the Bavarian rules give the followed district or device.
    case phase(PhaseID)
    /// The followed device is outside the region: no Bavarian phase applies.
    case outside
    /// No trustworthy phase: never shown with a traffic colour.
    case noSignal(NoSignalReason)

    /// How long each light is lit during the lamp test.
    public static let lampTestStep: UInt64 = 400
    /// The whole lamp test.
    public static let lampTestDuration: UInt64 = lampTestStep * 4
    /// DARK RED blinks at 1 Hz.
    public static let darkRedPeriod: UInt64 = 1000
    /// "No signal" blinks at 0.5 Hz: slower than DARK RED and in blue.
    public static let noSignalPeriod: UInt64 = 2000

    /// The pattern's name on the wire: `test`, `green`, `yellow`, `red`, `darkred`,
    /// `outside` or `nosignal`.
    public var name: StaticString {
        switch self {
        case .lampTest: "test"
        case .phase(let phase): phase.name
        case .outside: "outside"
        case .noSignal: "nosignal"
        }
    }

    /// The reason of a ``noSignal(_:)`` pattern.
    public var reason: NoSignalReason? {
        if case .noSignal(let reason) = self { return reason }
        return nil
    }

    /// Every light the pattern ever turns on.
    public var lights: LampLights {
        switch self {
        case .lampTest: .all
        case .phase(.green): .green
        case .phase(.yellow): .yellow
        case .phase(.red), .phase(.darkred): .red
        case .outside, .noSignal: .blue
        }
    }

    /// The repeat period in milliseconds; 0 for steady patterns.
    ///
    /// For the lamp test it is its whole (single) run.
    public var period: UInt64 {
        switch self {
        case .phase(.darkred): LampPattern.darkRedPeriod
        case .noSignal: LampPattern.noSignalPeriod
        case .lampTest: LampPattern.lampTestDuration
        default: 0
        }
    }

    /// Whether the lights go on and off over time.
    public var blinks: Bool { period != 0 }

    /// The lights that are on `elapsed` milliseconds after the pattern began.
    public func frame(elapsed: UInt64) -> LampFrame {
        switch self {
        case .lampTest:
            let step = elapsed / LampPattern.lampTestStep
            return LampFrame(lit: step < 4 ? LampLights.ordered[Int(step)] : [])
        case .phase(.darkred):
            return LampFrame(lit: elapsed % LampPattern.darkRedPeriod < LampPattern.darkRedPeriod / 2 ? .red : [])
        case .noSignal:
            return LampFrame(lit: elapsed % LampPattern.noSignalPeriod < LampPattern.noSignalPeriod / 2 ? .blue : [])
        default:
            return LampFrame(lit: lights)
        }
    }

    /// One JSON line (no newline) describing the pattern, as `ampel lamp --json` prints it.
    ///
    /// `{"pattern":"darkred","reason":null,"leds":["red"],"blink":true,"periodMs":1000}`;
    /// the keys are always present and always in this order.
    public var jsonLine: String {
        var line = "{\"pattern\":\""
        line += text(name)
        line += "\",\"reason\":"
        if let reason {
            line += "\"" + text(reason.name) + "\""
        } else {
            line += "null"
        }
        line += ",\"leds\":["
        var first = true
        for light in LampLights.ordered where lights.contains(light) {
            if !first { line += "," }
            line += "\"" + text(light.name) + "\""
            first = false
        }
        line += "],\"blink\":"
        line += blinks ? "true" : "false"
        line += ",\"periodMs\":"
        line += decimal(period)
        line += "}"
        return line
    }
}

/// The lights that are on at one moment.
public struct LampFrame: Sendable, Hashable {
    public var lit: LampLights

    public init(lit: LampLights) { self.lit = lit }

    /// The colour for a single RGB pixel or a WS2812 ring: the topmost lit light, or off.
    ///
    /// Every pattern lights at most one light at a time, so nothing is lost.
    public func color(_ palette: LampPalette = .standard) -> RGB {
        if lit.contains(.red) { return palette.red }
        if lit.contains(.yellow) { return palette.yellow }
        if lit.contains(.green) { return palette.green }
        if lit.contains(.blue) { return palette.blue }
        return .off
    }
}

/// The RGB colour of each light, for lamps built from RGB pixels.
public struct LampPalette: Sendable, Hashable {
    public var red: RGB
    public var yellow: RGB
    public var green: RGB
    public var blue: RGB

    public init(red: RGB, yellow: RGB, green: RGB, blue: RGB) {
        self.red = red
        self.yellow = yellow
        self.green = green
        self.blue = blue
    }

    /// Saturated colours that read well on WS2812 pixels (yellow leans amber on purpose:
    /// equal red and green looks greenish on most pixels).
    public static let standard = LampPalette(
        red: RGB(red: 0xFF, green: 0x00, blue: 0x00),
        yellow: RGB(red: 0xFF, green: 0xB0, blue: 0x00),
        green: RGB(red: 0x00, green: 0xFF, blue: 0x00),
        blue: RGB(red: 0x00, green: 0x40, blue: 0xFF)
    )
}

/// A static string as a `String`, byte for byte.
func text(_ literal: StaticString) -> String {
    String(decoding: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount), as: UTF8.self)
}

/// Decimal digits of `value`, without `description` (not available in Embedded Swift).
func decimal(_ value: UInt64) -> String {
    if value == 0 { return "0" }
    var digits: [UInt8] = []
    var rest = value
    while rest > 0 {
        digits.append(UInt8(truncatingIfNeeded: rest % 10) + 0x30)
        rest /= 10
    }
    digits.reverse()
    return String(decoding: digits, as: UTF8.self)
}
