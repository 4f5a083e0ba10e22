/// Rules for device keys: they become topic levels, so they must never carry a wildcard,
/// an empty level or a control character.
enum DeviceKey {
    /// The longest key accepted, in UTF-8 bytes.
    static let maxLength = 128

    /// Whether `key` is one or more safe topic levels (`alice/phone`, `tracker-7`).
    static func isSafe(_ key: String) -> Bool {
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
        // Wildcards and ASCII controls are ruled out above; beyond ASCII, whitespace, controls
        // and invisible or direction-changing characters are looked up.
        return ascii || firstUnsafeScalar(key) == nil
    }

    /// The first character of `key` that a person would not see, or that changes how the text
    /// around it is shown: whitespace (U+2028, U+2029 included), controls (`Cc`, C1 too), and
    /// format characters (`Cf`): the bidirectional controls U+202A-U+202E and U+2066-U+2069,
    /// the zero-width U+200B-U+200F, U+FEFF, the soft hyphen U+00AD and the rest of `Cf`.
    /// `alice\u{202E}enohp` shows as `alicephone` reversed in a log or a dashboard, and
    /// `alice\u{200B}` looks like `alice`: two keys a person cannot tell apart.
    static func firstUnsafeScalar(_ key: String) -> Unicode.Scalar? {
        key.unicodeScalars.first { scalar in
            guard scalar.value >= 0x80 else { return false }
            let properties = scalar.properties
            if properties.isWhitespace { return true }
            switch properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate: return true
            default: return false
            }
        }
    }

    /// `raw` with every character outside `A-Z a-z 0-9 . _ -` replaced by `_`; `nil` when
    /// nothing is left to name the device.
    static func sanitize(_ raw: String) -> String? {
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
    static func objectID(_ key: String) -> String {
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
