/// The topics the daemon writes, under one base topic (`ampel` by default).
///
/// One place builds every topic name, so the contract in `docs/topics.md` has one source.
public struct Topics: Sendable, Hashable {
    /// The first level(s) of every topic the daemon writes, without a trailing slash.
    public let base: String

    public init(base: String = "ampel") {
        self.base = base
    }

    public func deviceState(_ key: String) -> String { "\(base)/device/\(key)/state" }
    public func deviceAlert(_ key: String) -> String { "\(base)/device/\(key)/alert" }
    public func districtState(_ ags: String) -> String { "\(base)/district/\(ags)/state" }
    public func districtPhase(_ ags: String) -> String { "\(base)/district/\(ags)/phase" }
    public func districtAlert(_ ags: String) -> String { "\(base)/district/\(ags)/alert" }
    public var bridgeState: String { "\(base)/bridge/state" }
    public var bridgeInfo: String { "\(base)/bridge/info" }
}

/// An MQTT topic filter (`owntracks/+/+`, `ampel/location/+`, `a/#`), validated and matched.
///
/// The levels a filter's wildcards match name the device: `owntracks/+/+` on
/// `owntracks/alice/phone` gives `alice/phone`, so one rule serves every input.
public struct TopicFilter: Sendable, Hashable, CustomStringConvertible {
    public let filter: String
    private let levels: [Level]

    private enum Level: Sendable, Hashable {
        case exact([UInt8])
        case single  // +
        case multi  // #
    }

    /// Validates `filter` by the MQTT rules: `+` only as a whole level, `#` only as the last level.
    public init?(_ filter: String) {
        guard !filter.isEmpty, !filter.utf8.contains(0) else { return nil }
        let parts = filter.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        var levels: [Level] = []
        for (index, part) in parts.enumerated() {
            let plus = part.contains(UInt8(ascii: "+")), hash = part.contains(UInt8(ascii: "#"))
            if plus && part.count != 1 { return nil }
            if hash && (part.count != 1 || index != parts.count - 1) { return nil }
            levels.append(plus ? .single : hash ? .multi : .exact(Array(part)))
        }
        self.filter = filter
        self.levels = levels
    }

    public var description: String { filter }

    /// The topic levels matched by the wildcards, joined by `/`; `nil` when `topic` does not match.
    ///
    /// A filter without wildcards matches its own topic and captures the empty string. Works on
    /// the UTF-8 bytes (topic levels are compared byte for byte, as brokers do): this runs for
    /// every message the daemon receives.
    public func capture(_ topic: String) -> String? {
        var topic = topic
        return topic.withUTF8 { capture(bytes: $0) }
    }

    private func capture(bytes: UnsafeBufferPointer<UInt8>) -> String? {
        let slash = UInt8(ascii: "/")
        var start = 0  // where the next topic level starts; past `bytes.count` when none is left
        var pieces: [Range<Int>] = []
        func nextLevel() -> Range<Int>? {
            guard start <= bytes.count else { return nil }
            var end = start
            while end < bytes.count && bytes[end] != slash { end += 1 }
            defer { start = end + 1 }
            return start..<end
        }
        for level in levels {
            switch level {
            case .multi:
                // `a/#` also matches `a` itself (MQTT 3.1.1, 4.7.1.2).
                if start <= bytes.count { pieces.append(start..<bytes.count) }
                start = bytes.count + 1
            case .single:
                guard let range = nextLevel() else { return nil }
                pieces.append(range)
            case .exact(let expected):
                guard let range = nextLevel(), expected.elementsEqual(bytes[range]) else { return nil }
            }
        }
        guard start > bytes.count else { return nil }  // the topic has more levels
        // Topics starting with `$` are not matched by wildcards in the first level.
        if bytes.first == UInt8(ascii: "$"), startsWithWildcard { return nil }
        guard let first = pieces.first, let last = pieces.last else { return "" }
        // The captured levels are usually adjacent (`owntracks/+/+`): one slice of the topic.
        if zip(pieces, pieces.dropFirst()).allSatisfy({ $0.upperBound + 1 == $1.lowerBound }) {
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[first.lowerBound..<last.upperBound]), as: UTF8.self)
        }
        var joined: [UInt8] = []
        for (index, piece) in pieces.enumerated() {
            if index > 0 { joined.append(slash) }
            joined.append(contentsOf: bytes[piece])
        }
        return String(decoding: joined, as: UTF8.self)
    }

    private var startsWithWildcard: Bool {
        if case .exact = levels[0] { false } else { true }
    }

    /// Whether `topic` matches.
    public func matches(_ topic: String) -> Bool { capture(topic) != nil }
}

/// Rules for device keys: they become topic levels, so they must never carry a wildcard,
/// an empty level or a control character.
public enum DeviceKey {
    /// The longest key accepted, in UTF-8 bytes.
    public static let maxLength = 128

    /// Whether `key` is one or more safe topic levels (`alice/phone`, `tracker-7`).
    public static func isSafe(_ key: String) -> Bool {
        let bytes = key.utf8
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        guard bytes.first != UInt8(ascii: "$") else { return false }
        // One pass over the bytes (this runs for every location message); Unicode properties
        // are looked up only for keys that are not plain ASCII.
        var previous = UInt8(ascii: "/")  // a leading "/" would start an empty level
        var ascii = true
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "/") where previous == UInt8(ascii: "/"): return false  // empty level
            case UInt8(ascii: "+"), UInt8(ascii: "#"), 0x7F, ..<0x21: return false  // wildcards, controls, space
            case 0x80...: ascii = false
            default: break
            }
            previous = byte
        }
        if previous == UInt8(ascii: "/") { return false }  // trailing empty level
        // Wildcards and ASCII controls are ruled out above; beyond ASCII only whitespace is left.
        return ascii || !key.unicodeScalars.contains { $0.properties.isWhitespace }
    }

    /// `raw` with every character outside `A-Z a-z 0-9 . _ -` replaced by `_`; `nil` when
    /// nothing is left to name the device.
    public static func sanitize(_ raw: String) -> String? {
        var out = ""
        for scalar in raw.unicodeScalars {
            switch scalar {
            case "A"..."Z", "a"..."z", "0"..."9", ".", "_", "-": out.unicodeScalars.append(scalar)
            default: out.append("_")
            }
        }
        guard out.contains(where: { $0 != "_" }), isSafe(out) else { return nil }
        return out
    }

    /// A form of `key` fit for Home Assistant object ids and unique ids: `[a-z0-9_]` only.
    ///
    /// When characters had to be replaced, a hash of the original key is appended, so
    /// `a/b` and `a_b` never share an id.
    public static func objectID(_ key: String) -> String {
        var out = ""
        for scalar in key.unicodeScalars {
            switch scalar {
            case "a"..."z", "0"..."9", "_": out.unicodeScalars.append(scalar)
            default: out.append("_")
            }
        }
        if out == key { return out }
        var hash: UInt32 = 2_166_136_261
        for byte in key.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        let hex = String(hash, radix: 16)
        return out + "_" + String(repeating: "0", count: 8 - hex.count) + hex
    }
}
