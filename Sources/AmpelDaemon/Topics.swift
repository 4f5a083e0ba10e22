import AmpelMQTT
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
/// It forwards to ``MQTTTopicFilter``; what it adds is only the failable initialiser the
/// configuration reader and its tests call. Once they call `MQTTTopicFilter` (throwing), this
/// type goes.
///
/// The levels a filter's wildcards match name the device: `owntracks/+/+` on
/// `owntracks/alice/phone` gives `alice/phone`, so one rule serves every input.
public struct TopicFilter: Sendable, Hashable, CustomStringConvertible {
    private let mqtt: MQTTTopicFilter

    /// The filter as configured and subscribed, including a `$share/<group>/` prefix.
    public var filter: String { mqtt.filter }

    /// Validates `filter` by the MQTT rules (``MQTTTopicFilter``): `+` only as a whole level, `#`
    /// only as the last level; `$share/<group>/<filter>` for a shared subscription.
    public init?(_ filter: String) {
        guard let mqtt = try? MQTTTopicFilter(filter) else { return nil }
        self.mqtt = mqtt
    }

    public var description: String { filter }

    /// The topic levels matched by the wildcards, joined by `/`; `nil` when `topic` does not
    /// match. A shared subscription matches the topics of its filter (the broker delivers
    /// `owntracks/alice/phone` to `$share/ampel/owntracks/+/+`).
    public func capture(_ topic: String) -> String? { mqtt.capture(topic) }
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
