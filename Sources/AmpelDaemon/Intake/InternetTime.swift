import AmpelDomain

/// RFC 3339 timestamps (`2020-11-05T10:00:00Z`) without Foundation's date formatters.
///
/// The one timestamp in `bridge/info` and Traccar's `fixTime` only ever need UTC and whole or
/// fractional seconds, which is plain arithmetic on the proleptic Gregorian calendar. Checked
/// against Foundation in `InternetTimeTests`. The calendar arithmetic is ``AmpelDomain/Day``'s.
///
/// Kept over `Date.ISO8601FormatStyle`: in a process linking Foundation, as the daemon does, using
/// it once raised VmRSS to 14,504 kB vs 9,916 kB with this (`ISO8601DateFormatter` 16,596 kB), it parsed
/// 5 times slower, and it takes what RFC 3339 refuses (`2021-02-29`, `24:00`, trailing text)
/// while refusing a lower-case `t` (benchmark Benchmarks/structures).
enum InternetTime {
    /// `seconds` since 1970 as `YYYY-MM-DDTHH:MM:SSZ` (fractions dropped).
    static func format(secondsSince1970 seconds: Double) -> String {
        let whole = Int(seconds.rounded(.down))
        let days = whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400
        let secondOfDay = whole - days * 86_400
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(Day(daysSinceEpoch: days).iso)T\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60))Z"
    }

    /// Seconds since 1970 of an RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS`, optional fraction,
    /// then `Z`, `±HH:MM` or `±HHMM` (Jackson, as Traccar writes it). `nil` for anything else.
    static func parse(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        var position = 0
        func number(_ digits: Int) -> Int? {
            guard position + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[position..<position + digits] {
                guard byte >= 0x30 && byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            position += digits
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard position < bytes.count, characters.utf8.contains(bytes[position]) else { return false }
            position += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
            expect("Tt"), let hour = number(2), expect(":"), let minute = number(2), expect(":"), let second = number(2)
        else { return nil }
        guard let date = Day(year: year, month: month, day: day), hour < 24, minute < 60, second < 60 else { return nil }
        var fraction = 0.0
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            var scale = 0.1
            let start = position
            while position < bytes.count, bytes[position] >= 0x30 && bytes[position] <= 0x39 {
                fraction += Double(bytes[position] - 0x30) * scale
                scale /= 10
                position += 1
            }
            guard position > start else { return nil }
        }
        var offset = 0
        if expect("Zz") {
            offset = 0
        } else if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
            let sign = bytes[position] == UInt8(ascii: "-") ? -1 : 1
            position += 1
            guard let hours = number(2) else { return nil }
            _ = expect(":")
            guard let minutes = number(2), hours < 24, minutes < 60 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        guard position == bytes.count else { return nil }
        return Double(date.daysSinceEpoch * 86_400 + hour * 3600 + minute * 60 + second - offset) + fraction
    }
}
