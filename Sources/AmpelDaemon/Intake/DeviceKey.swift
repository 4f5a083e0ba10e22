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
