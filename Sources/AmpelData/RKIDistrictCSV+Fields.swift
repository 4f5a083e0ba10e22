import AmpelDomain
import Foundation

/// The fields of a row: the day, the integers, the decimals, and the errors that name them.
extension RKIDistrictCSV {
    func fieldsError(_ p: UnsafePointer<UInt8>, _ length: Int, commas: Int) -> DataError {
        let text = String(decoding: UnsafeBufferPointer(start: p, count: min(length, 120)), as: UTF8.self)
        return DataError(.malformed, "line \(lineNumber): \(commas + 1) fields, the header has \(fieldCount) ('\(text)'): a row cut short or not the RKI's district file")
    }

    func day(_ p: UnsafePointer<UInt8>, _ length: Int) throws(DataError) -> Int32 {
        guard length == 10 else { throw badField(0, p, length) }
        let raw = UnsafeRawPointer(p)
        let key = (raw.loadUnaligned(as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt16.self))
        if key == lastDateKey { return lastDay }
        func digits(_ from: Int, _ count: Int) -> Int? {
            var value = 0
            for k in from..<(from + count) {
                let digit = Int(p[k]) &- 48
                guard digit >= 0, digit <= 9 else { return nil }
                value = value * 10 + digit
            }
            return value
        }
        guard p[4] == 0x2D, p[7] == 0x2D, let year = digits(0, 4), let month = digits(5, 2), let dayOfMonth = digits(8, 2),
              (2000...2099).contains(year), let parsed = Day(year: year, month: month, day: dayOfMonth)
        else { throw badField(0, p, length) }
        lastDateKey = key
        lastDay = Int32(parsed.daysSinceEpoch)
        return lastDay
    }

    /// A non-negative integer field.
    @inline(__always)
    func integer(_ field: (UnsafePointer<UInt8>, Int), column: Int) throws(DataError) -> Int {
        let (p, length) = field
        guard length > 0, length <= 12 else { throw badField(column, p, length) }
        var value = 0
        for k in 0..<length {
            let digit = Int(p[k]) &- 48
            guard digit >= 0, digit <= 9 else { throw badField(column, p, length) }
            value = value &* 10 &+ digit
        }
        return value
    }

    /// A non-negative decimal field: digits with an optional fraction, as the RKI writes them
    /// (`0`, `12.3`); anything else `strtod` reads as a finite non-negative number is taken too.
    @inline(__always)
    func decimal(_ field: (UnsafePointer<UInt8>, Int)) throws(DataError) -> Double {
        let (p, length) = field
        guard length > 0, length <= 40 else { throw badField(6, p, length) }
        var mantissa: UInt64 = 0
        var fraction = -1
        var k = 0
        while k < length {
            let byte = p[k]
            if byte == 0x2E, fraction < 0 {
                fraction = 0
            } else {
                let digit = UInt64(byte) &- 48
                guard digit <= 9 else { break }
                mantissa = mantissa &* 10 &+ digit
                if fraction >= 0 { fraction += 1 }
            }
            k += 1
        }
        // Exact when the digits fit in 53 bits and the power of ten is exact (up to 10^22):
        // the one division rounds correctly, as `Double(String)` would.
        if k == length, length <= 17, fraction != 0, k > (fraction < 0 ? 0 : 1) {
            return fraction <= 0 ? Double(mantissa) : Double(mantissa) / Self.powerOfTen(fraction)
        }
        var text = [CChar](repeating: 0, count: length + 1)
        for j in 0..<length { text[j] = CChar(bitPattern: p[j]) }
        var endPointer: UnsafeMutablePointer<CChar>?
        let value = text.withUnsafeBufferPointer { buffer in strtod(buffer.baseAddress!, &endPointer) }
        let consumed = text.withUnsafeBufferPointer { buffer in endPointer.map { UnsafePointer($0) - buffer.baseAddress! } ?? 0 }
        guard consumed == length, value.isFinite, value >= 0 else { throw badField(6, p, length) }
        return value
    }

    /// 10^n for n in 1...22, each exact in a Double. Literals, not a `static let` array: that
    /// one's `swift_once` check ran on every row (1.6 % of a parse in perf).
    @inline(__always)
    static func powerOfTen(_ n: Int) -> Double {
        switch n {
        case 1: 1e1
        case 2: 1e2
        case 3: 1e3
        case 4: 1e4
        case 5: 1e5
        case 6: 1e6
        case 7: 1e7
        case 8: 1e8
        case 9: 1e9
        case 10: 1e10
        case 11: 1e11
        case 12: 1e12
        case 13: 1e13
        case 14: 1e14
        case 15: 1e15
        case 16: 1e16
        case 17: 1e17
        case 18: 1e18
        case 19: 1e19
        case 20: 1e20
        case 21: 1e21
        default: 1e22
        }
    }

    func badField(_ column: Int, _ p: UnsafePointer<UInt8>, _ length: Int) -> DataError {
        let text = String(decoding: UnsafeBufferPointer(start: p, count: min(length, 40)), as: UTF8.self)
        let what = column == 0 ? "a day YYYY-MM-DD" : column == 6 ? "a non-negative number" : "a non-negative integer"
        return DataError(.invalidValue, "line \(lineNumber): \(Self.columns[column]) '\(text)' is not \(what)")
    }
}
