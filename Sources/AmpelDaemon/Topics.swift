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
    private let levels: [Substring]

    /// Validates `filter` by the MQTT rules: `+` only as a whole level, `#` only as the last level.
    public init?(_ filter: String) {
        guard !filter.isEmpty, !filter.utf8.contains(0) else { return nil }
        let levels = filter.split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in levels.enumerated() {
            if level.contains("+") && level != "+" { return nil }
            if level.contains("#") && (level != "#" || index != levels.count - 1) { return nil }
        }
        self.filter = filter
        self.levels = levels
    }

    public var description: String { filter }

    /// The topic levels matched by the wildcards, joined by `/`; `nil` when `topic` does not match.
    ///
    /// A filter without wildcards matches its own topic and captures the empty string.
    public func capture(_ topic: String) -> String? {
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false)
        var captured: [Substring] = []
        var index = 0
        for level in levels {
            if level == "#" {
                // `a/#` also matches `a` itself (MQTT 3.1.1, 4.7.1.2).
                captured.append(contentsOf: parts[min(index, parts.count)...])
                return captured.joined(separator: "/")
            }
            guard index < parts.count else { return nil }
            let part = parts[index]
            if level == "+" {
                captured.append(part)
            } else if level != part {
                return nil
            }
            index += 1
        }
        guard index == parts.count else { return nil }
        // Topics starting with `$` are not matched by wildcards in the first level.
        if let first = levels.first, first == "+" || first == "#", parts.first?.hasPrefix("$") == true { return nil }
        return captured.joined(separator: "/")
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
        for level in key.split(separator: "/", omittingEmptySubsequences: false) where level.isEmpty { return false }
        for scalar in key.unicodeScalars {
            switch scalar {
            case "+", "#": return false
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F { return false }
                if scalar.properties.isWhitespace { return false }
            }
        }
        return true
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
