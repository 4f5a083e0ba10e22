import AmpelCore

/// What happens to a lamp; times are milliseconds on any monotonic clock.
public enum LampEvent: Sendable, Hashable {
    /// The lamp (re)starts: everything is forgotten and the lamp test runs.
    case powerOn(at: UInt64)
    /// Time passes. Ends the lamp test; drives blinking through ``LampStateMachine/frame(at:)``.
    case tick(at: UInt64)
    /// A message arrived; the topic decides what it means (see ``LampTopics``).
    case message(topic: [UInt8], payload: [UInt8])
    /// The data-stale flag from elsewhere (the signal object's `stale` sets it too).
    case dataStale(Bool)
    /// The lamp's own broker connection came up or went down.
    case link(up: Bool)
}

/// What the driver must do after an event.
public enum LampAction: Sendable, Hashable {
    /// The pattern is unchanged (frames may still change over time: blinking).
    case none
    /// Show this new pattern (redraw, print a JSON line).
    case show(LampPattern)
}

/// The lamp's logic: events in, patterns out; no I/O, no clock, no allocation beyond
/// the message bytes.
///
/// The board glue (ESP32-C6), the terminal emulator (`ampel lamp`) and the host tests drive
/// the same code: they feed ``event(_:)`` and read ``frame(at:)``.
///
/// Precedence, strongest first: the lamp test; offline (bridge offline or own link down);
/// waiting (nothing valid received yet); stale data; the signal (a phase or outside).
/// Messages that are not understood are dropped without any effect.
public struct LampStateMachine: Sendable {
    public let topics: LampTopics

    /// The last valid signal received.
    public private(set) var signal: LampSignal? = nil
    private var stale = false
    private var bridgeOnline = true
    private var linkUp = true
    private var testStartedAt: UInt64? = nil
    private var now: UInt64 = 0

    /// What the lamp shows now.
    public private(set) var pattern: LampPattern = .noSignal(.waiting)
    /// When ``pattern`` began (blinking starts with the light on).
    public private(set) var patternStartedAt: UInt64 = 0

    /// Messages dropped because they were not understood (for logs and tests).
    public private(set) var ignoredMessages = 0

    /// A lamp that shows "no signal (waiting)" until power-on or the first valid signal.
    public init(topics: LampTopics) {
        self.topics = topics
    }

    /// Feeds one event; answers ``LampAction/show(_:)`` when the pattern changed.
    public mutating func event(_ event: LampEvent) -> LampAction {
        switch event {
        case .powerOn(let time):
            let topics = self.topics
            self = LampStateMachine(topics: topics)
            now = time
            testStartedAt = time
        case .tick(let time):
            if time > now { now = time }
            if let start = testStartedAt, now &- start >= LampPattern.lampTestDuration {
                testStartedAt = nil
            }
        case .message(let topic, let payload):
            receive(topic: topic, payload: payload)
        case .dataStale(let flag):
            stale = flag
        case .link(let up):
            linkUp = up
        }
        return update()
    }

    /// The lights that are on at `time`.
    public func frame(at time: UInt64) -> LampFrame {
        pattern.frame(elapsed: time > patternStartedAt ? time - patternStartedAt : 0)
    }

    private mutating func receive(topic: [UInt8], payload: [UInt8]) {
        switch topics.role(of: topic) {
        case .signal:
            switch topics.follow {
            case .district:
                if let signal = LampPayload.plainSignal(payload) {
                    self.signal = signal
                } else {
                    ignoredMessages += 1
                }
            case .device:
                if let reading = LampPayload.signalObject(payload) {
                    signal = reading.signal
                    stale = reading.stale
                } else {
                    ignoredMessages += 1
                }
            }
        case .districtState:
            if let flag = LampPayload.staleFlag(payload) { stale = flag } else { ignoredMessages += 1 }
        case .bridge:
            if let online = LampPayload.bridgeOnline(payload) { bridgeOnline = online } else { ignoredMessages += 1 }
        case nil:
            ignoredMessages += 1
        }
    }

    private func derivedPattern() -> LampPattern {
        if testStartedAt != nil { return .lampTest }
        if !bridgeOnline || !linkUp { return .noSignal(.offline) }
        guard let signal else { return .noSignal(.waiting) }
        if stale { return .noSignal(.stale) }
        switch signal {
        case .phase(let phase): return .phase(phase)
        case .outside: return .outside
        }
    }

    private mutating func update() -> LampAction {
        let next = derivedPattern()
        guard next != pattern else { return .none }
        pattern = next
        patternStartedAt = now
        return .show(next)
    }
}
