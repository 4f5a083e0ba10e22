import Foundation

/// Paging through the device keys in byte order: a cursor names the last key of a page, so
/// pages stay stable while devices come and go (no offsets that shift).
enum DevicePage {
    struct Page: Sendable, Hashable {
        var keys: [String]
        /// The last key of this page when more match after it.
        var next: String?
        /// How many keys match in all.
        var total: Int
    }

    /// Up to `limit` keys after `after` that contain `search` (ASCII letters in any case).
    /// - Parameter sorted: keys in byte order (``StatusView/sortedKeys(of:)``).
    static func page(_ sorted: [String], after: String?, matching search: String?, limit: Int) -> Page {
        var start = 0
        if let after {
            var high = sorted.count
            while start < high {
                let mid = (start + high) / 2
                if after.utf8.lexicographicallyPrecedes(sorted[mid].utf8) {
                    high = mid
                } else {
                    start = mid + 1
                }
            }
        }
        let needle = search.map { Array($0.utf8).map(folded) }
        func matches(_ key: String) -> Bool {
            guard let needle else { return true }
            return contains(Array(key.utf8), needle)
        }
        let total = needle == nil ? sorted.count : sorted.reduce(0) { $0 + (matches($1) ? 1 : 0) }
        var keys: [String] = []
        var index = start
        while index < sorted.count, keys.count < limit {
            if matches(sorted[index]) { keys.append(sorted[index]) }
            index += 1
        }
        var more = false
        while index < sorted.count, !more {
            more = matches(sorted[index])
            index += 1
        }
        return Page(keys: keys, next: more ? keys.last : nil, total: total)
    }

    static func folded(_ byte: UInt8) -> UInt8 { (65...90).contains(byte) ? byte + 32 : byte }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty else { return true }
        guard haystack.count >= needle.count else { return false }
        outer: for start in 0...(haystack.count - needle.count) {
            for offset in 0..<needle.count where folded(haystack[start + offset]) != needle[offset] { continue outer }
            return true
        }
        return false
    }

    /// The cursor of a key: its bytes in base64url, so any key fits a query string.
    static func cursor(for key: String) -> String {
        Data(key.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The key a cursor names; `nil` for text that is no cursor.
    static func key(ofCursor cursor: String) -> String? {
        var base64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard base64.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "/") }) else { return nil }
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), !data.isEmpty, let key = String(data: data, encoding: .utf8) else { return nil }
        return key
    }
}
