import AmpelCore
import AmpelDomain
import Foundation

/// One position of one device, accepted by an input parser.
struct LocationFix: Sendable, Hashable {
    /// The device key, one or more safe topic levels (`alice/phone`).
    var device: String
    var latitude: Double
    var longitude: Double
    /// When the fix was taken, in seconds since 1970; `nil` when the message did not say.
    var tst: Int?
    /// The language the message asked for (`lang`), if any.
    var lang: String?
    /// The message had a `lang` that was ignored: not a string, not valid UTF-8, cut by the
    /// scanner, or no language Ampel speaks (``AmpelDomain/Language``). The device keeps the
    /// language it had; the daemon counts it (`invalidLang` in `bridge/info`).
    var langIgnored: Bool
    /// The radius of the fix's uncertainty in metres (OwnTracks and plain `acc`, Traccar
    /// `accuracy`); `nil` when the message did not say, or said something that is no distance.
    var accuracy: Double?
    /// The fix came from an OwnTracks app on `owntracks/<user>/<device>`
    /// (``OwnTracksNotices/isAppTopic(_:key:)``): its user's apps can be told of alerts.
    var owntracks: Bool

    init(device: String, latitude: Double, longitude: Double, tst: Int?, lang: String? = nil, langIgnored: Bool = false,
                accuracy: Double? = nil, owntracks: Bool = false) {
        self.device = device
        self.latitude = latitude
        self.longitude = longitude
        self.tst = tst
        self.lang = lang
        self.langIgnored = langIgnored
        self.accuracy = accuracy
        self.owntracks = owntracks
    }
}

/// The payload formats the daemon reads.
enum InputKind: String, Sendable, Hashable, CaseIterable, Codable {
    /// OwnTracks JSON (`_type: location`), device key from the topic.
    case owntracks
    /// `{"lat","lon"}` or `{"latitude","longitude"}`, device key from the topic.
    case plain
    /// Traccar position forwarding (`forward.type=mqtt`), device key from `device.uniqueId`.
    case traccar
}

/// Why a payload was dropped: a stable key, used as a counter label and in logs.
struct DropReason: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    let rawValue: String
    init(rawValue: String) { self.rawValue = rawValue }
    var description: String { rawValue }
    static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Larger than the configured limit (`inputs.max_payload`).
    static let oversized = DropReason(rawValue: "oversized")
    /// Not valid UTF-8 JSON, or not a JSON object.
    static let notJSON = DropReason(rawValue: "not-json")
    /// No latitude or longitude.
    static let missingCoordinates = DropReason(rawValue: "missing-coordinates")
    /// A coordinate that is not a number or lies outside ±90° / ±180°.
    static let invalidCoordinates = DropReason(rawValue: "invalid-coordinates")
    /// A timestamp that is not a non-negative number (or, for Traccar, a date).
    static let invalidTimestamp = DropReason(rawValue: "invalid-timestamp")
    /// The device key would not be a safe topic level.
    static let unsafeDeviceKey = DropReason(rawValue: "unsafe-device-key")
    /// A fix older (by `tst`) than the one held for the device.
    static let outOfOrder = DropReason(rawValue: "out-of-order")
    /// A fix whose `acc` is above `inputs.max_accuracy` that would have moved its device into
    /// another district (or placed a device never seen).
    static let inaccurate = DropReason(rawValue: "inaccurate")
}

/// What an input parser made of one message.
enum ParseOutcome: Sendable, Hashable {
    /// A position to evaluate.
    case fix(LocationFix)
    /// A message of a kind the daemon does not use (OwnTracks `lwt`, `transition`, …), counted by kind.
    case skipped(String)
    /// A bad payload, counted by reason; `detail` says what was wrong, for the log.
    case dropped(DropReason, detail: String)
}

/// Parses the three input formats. Pure: bytes and topic capture in, an outcome out.
struct InputParser: Sendable {
    /// Payloads larger than this many bytes are dropped unread.
    var maxPayload: Int

    init(maxPayload: Int = 16_384) {
        self.maxPayload = maxPayload
    }

    /// Parses `payload` of `kind`; `topicKey` is what the subscription's wildcards matched.
    func parse(_ kind: InputKind, topicKey: String, payload: some Collection<UInt8>) -> ParseOutcome {
        guard payload.count <= maxPayload else {
            return .dropped(.oversized, detail: "\(payload.count) bytes, limit \(maxPayload)")
        }
        let bytes = Array(payload)
        switch kind {
        case .owntracks: return owntracks(topicKey: topicKey, bytes)
        case .plain: return plain(topicKey: topicKey, bytes)
        case .traccar: return traccar(Data(bytes))
        }
    }

    func owntracks(topicKey: String, _ payload: [UInt8]) -> ParseOutcome {
        if firstNonSpace(payload) == UInt8(ascii: "[") {
            // OwnTracks sends arrays only over HTTP; they are no location message on MQTT.
            return isJSON(Data(payload)) ? .skipped("array") : .dropped(.notJSON, detail: "not valid JSON")
        }
        guard let message = FlatMessage(payload, maximumLength: max(maxPayload, JSONScanner.maximumLength)) else {
            return .dropped(.notJSON, detail: "not a JSON object")
        }
        guard case .value(let type) = message.text("_type") else { return .skipped("untyped") }
        guard type == "location" else {
            let known = ["lwt", "transition", "waypoint", "waypoints", "card", "encrypted", "cmd", "status", "steps", "beacon", "dump", "configuration", "request"]
            return .skipped(known.contains(type) ? type : "other")
        }
        return makeFix(topicKey: topicKey, lat: message.number("lat"), lon: message.number("lon"), tst: message.number("tst"), lang: nil,
                       accuracy: message.number("acc"))
    }

    func plain(topicKey: String, _ payload: [UInt8]) -> ParseOutcome {
        guard let message = FlatMessage(payload, maximumLength: max(maxPayload, JSONScanner.maximumLength)) else {
            return .dropped(.notJSON, detail: "not a JSON object")
        }
        let lang = message.language("lang")
        let outcome = makeFix(topicKey: topicKey, lat: message.number(anyOf: "lat", "latitude"), lon: message.number(anyOf: "lon", "longitude"),
                              tst: message.number("tst"), lang: lang.value, accuracy: message.number("acc"))
        guard lang.ignored, case .fix(var fix) = outcome else { return outcome }
        fix.langIgnored = true
        return .fix(fix)
    }

    func traccar(_ data: Data) -> ParseOutcome {
        let message: TraccarMessage
        do {
            message = try JSONDecoder().decode(TraccarMessage.self, from: data)
        } catch {
            return .dropped(.notJSON, detail: "not a JSON object")
        }
        // Traccar marks a position its device could not fix (no satellites, a stale cell) with
        // `valid: false`; its coordinates are the last known ones or zero.
        if message.valid == .value(false) { return .skipped("invalid") }
        guard case .value(let raw) = message.uniqueId else {
            return .dropped(.unsafeDeviceKey, detail: "no device.uniqueId")
        }
        guard let key = DeviceKey.sanitize(raw) else {
            return .dropped(.unsafeDeviceKey, detail: "device.uniqueId gives no usable key")
        }
        var tst: Field<Double> = .missing
        switch message.fixTime {
        case .missing: tst = .missing
        case .invalid: tst = .invalid
        case .value(.number(let value)): tst = .value(value > 100_000_000_000 ? value / 1000 : value)
        case .value(.text(let text)):
            guard let seconds = InternetTime.parse(text) else { return .dropped(.invalidTimestamp, detail: "position.fixTime is no date") }
            tst = .value(seconds.rounded(.down))
        }
        return makeFix(topicKey: key, lat: message.lat, lon: message.lon, tst: tst, lang: nil, accuracy: message.accuracy)
    }

    func makeFix(topicKey: String, lat: Field<Double>, lon: Field<Double>, tst: Field<Double>, lang: String?,
                 accuracy: Field<Double> = .missing) -> ParseOutcome {
        guard DeviceKey.isSafe(topicKey) else {
            if let scalar = DeviceKey.firstUnsafeScalar(topicKey) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                return .dropped(.unsafeDeviceKey, detail: "device key holds the invisible or bidirectional character U+\(String(repeating: "0", count: max(0, 4 - hex.count)))\(hex)")
            }
            return .dropped(.unsafeDeviceKey, detail: "device key is not a safe topic level")
        }
        let latitude: Double
        let longitude: Double
        switch (lat, lon) {
        case (.value(let a), .value(let b)):
            latitude = a
            longitude = b
        case (.invalid, _), (_, .invalid):
            return .dropped(.invalidCoordinates, detail: "a coordinate is not a number")
        default:
            return .dropped(.missingCoordinates, detail: "no latitude or longitude")
        }
        guard latitude.isFinite, longitude.isFinite, (-90...90).contains(latitude), (-180...180).contains(longitude) else {
            return .dropped(.invalidCoordinates, detail: "coordinates out of range")
        }
        var seconds: Int?
        switch tst {
        case .missing: seconds = nil
        case .invalid: return .dropped(.invalidTimestamp, detail: "tst is not a number")
        case .value(let value):
            guard value.isFinite, value >= 0, value < 1e12 else { return .dropped(.invalidTimestamp, detail: "tst out of range") }
            seconds = Int(value)
        }
        // An accuracy that is no distance is ignored rather than the fix dropped: the position is
        // still good, and `acc` is optional in every format.
        var metres: Double?
        if case .value(let value) = accuracy, value.isFinite, value >= 0 { metres = value }
        return .fix(LocationFix(device: topicKey, latitude: latitude, longitude: longitude, tst: seconds, lang: lang, accuracy: metres))
    }
}

private func firstNonSpace(_ data: some Collection<UInt8>) -> UInt8? {
    data.first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
}

private func isJSON(_ data: Data) -> Bool {
    (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil
}

/// A JSON field that may be absent, present with the wrong type, or usable.
enum Field<Value: Sendable & Hashable>: Sendable, Hashable {
    case missing
    case invalid
    case value(Value)
}

/// Dynamic keys, so each message decodes only the keys it needs and ignores the rest.
struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension KeyedDecodingContainer where Key == AnyKey {
    /// The field `name`: `.missing` when absent or null, `.invalid` when of another type.
    func field<T: Decodable & Sendable & Hashable>(_ type: T.Type, _ name: String) -> Field<T> {
        let key = AnyKey(name)
        guard contains(key), (try? decodeNil(forKey: key)) == false else { return .missing }
        guard let value = try? decode(T.self, forKey: key) else { return .invalid }
        return .value(value)
    }
}

/// The top-level members of a flat JSON object (OwnTracks, plain), read in one pass by
/// `AmpelCore.JSONScanner` without building a tree: the location inputs are the daemon's
/// hot path, and `JSONDecoder` cost more than everything else a fix does.
///
/// Field rules as for the decoders: absent or `null` is `.missing`, another type `.invalid`;
/// a repeated key takes its last value.
struct FlatMessage {
    private var members: [String: JSONValue] = [:]
    private let bytes: [UInt8]

    /// `nil` when the payload is not one valid JSON object.
    init?(_ bytes: [UInt8], maximumLength: Int) {
        self.bytes = bytes
        var members: [String: JSONValue] = [:]
        do {
            try JSONScanner.scanTopLevel(bytes, maximumLength: maximumLength) { key, value in
                // Keys longer than the scanner keeps are none the parsers read.
                guard !key.isTruncated else { return }
                members[String(decoding: key.utf8, as: UTF8.self)] = value
            }
        } catch {
            return nil
        }
        self.members = members
    }

    func number(_ key: String) -> Field<Double> {
        switch members[key] {
        case nil, .null?: return .missing
        case .number(let n)?:
            // The scanner checked the grammar; a value beyond Double's range reads as infinity.
            let text = String(decoding: bytes[n.start..<n.end], as: UTF8.self)
            return Double(text).map { .value($0) } ?? .invalid
        default: return .invalid
        }
    }

    /// The first of the keys that is present.
    func number(anyOf first: String, _ second: String) -> Field<Double> {
        let value = number(first)
        return value == .missing ? number(second) : value
    }

    /// A `lang` member: `value` is the language asked for, when it is valid UTF-8, whole (not
    /// cut at the scanner's ``JSONText/capacity``) and a language Ampel speaks (`de`, `en-GB`,
    /// `de_DE.UTF-8`); `ignored` when the member was there (not `null`) but is none of that.
    func language(_ key: String) -> (value: String?, ignored: Bool) {
        switch members[key] {
        case nil, .null?: return (nil, false)
        case .string(let text)?:
            guard !text.isTruncated, let value = String(validating: text.utf8, as: UTF8.self),
                  Language(known: value) != nil else { return (nil, true) }
            return (value, false)
        default: return (nil, true)
        }
    }

    /// A string member; texts longer than the scanner keeps are cut (no member read here is long).
    func text(_ key: String) -> Field<String> {
        switch members[key] {
        case nil, .null?: return .missing
        case .string(let text)?: return .value(String(decoding: text.utf8, as: UTF8.self))
        default: return .invalid
        }
    }
}

/// A number or a string, for Traccar's `fixTime` (ISO 8601 text, or epoch milliseconds).
enum NumberOrText: Decodable, Sendable, Hashable {
    case number(Double)
    case text(String)

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let number = try? c.decode(Double.self) { self = .number(number); return }
        self = .text(try c.decode(String.self))
    }
}

/// `{"position":{"latitude","longitude","fixTime","accuracy","valid"},"device":{"uniqueId"}}`.
struct TraccarMessage: Decodable {
    var lat: Field<Double> = .missing
    var lon: Field<Double> = .missing
    var accuracy: Field<Double> = .missing
    var valid: Field<Bool> = .missing
    var fixTime: Field<NumberOrText> = .missing
    var uniqueId: Field<String> = .missing

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        if let position = try? c.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("position")) {
            lat = position.field(Double.self, "latitude")
            lon = position.field(Double.self, "longitude")
            fixTime = position.field(NumberOrText.self, "fixTime")
            accuracy = position.field(Double.self, "accuracy")
            valid = position.field(Bool.self, "valid")
        }
        if let device = try? c.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("device")) {
            uniqueId = device.field(String.self, "uniqueId")
        }
    }
}
