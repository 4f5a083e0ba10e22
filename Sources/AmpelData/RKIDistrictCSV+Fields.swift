import AmpelDomain
import Foundation
import NIOCore

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
            return fraction <= 0 ? Double(mantissa) : Double(mantissa) / Self.powersOfTen[fraction]
        }
        var text = [CChar](repeating: 0, count: length + 1)
        for j in 0..<length { text[j] = CChar(bitPattern: p[j]) }
        var endPointer: UnsafeMutablePointer<CChar>?
        let value = text.withUnsafeBufferPointer { buffer in strtod(buffer.baseAddress!, &endPointer) }
        let consumed = text.withUnsafeBufferPointer { buffer in endPointer.map { UnsafePointer($0) - buffer.baseAddress! } ?? 0 }
        guard consumed == length, value.isFinite, value >= 0 else { throw badField(6, p, length) }
        return value
    }

    private static let powersOfTen: [Double] = (0...22).map { pow(10, Double($0)) }

    func badField(_ column: Int, _ p: UnsafePointer<UInt8>, _ length: Int) -> DataError {
        let text = String(decoding: UnsafeBufferPointer(start: p, count: min(length, 40)), as: UTF8.self)
        let what = column == 0 ? "a day YYYY-MM-DD" : column == 6 ? "a non-negative number" : "a non-negative integer"
        return DataError(.invalidValue, "line \(lineNumber): \(Self.columns[column]) '\(text)' is not \(what)")
    }
}
