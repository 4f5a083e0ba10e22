import AmpelDomain
import Foundation

/// The CSV layer under the RKI's state-level files (``HospitalisationCSV``,
/// ``IntensiveCareCSV``): records and fields, the header's columns by name, the fields read as
/// days, state ids and numbers, and errors that name the file and the line.
///
/// One pass over the bytes; a field is a range of them, so a row builds no `String` unless a
/// parser asks for a field's text or a number is not plain digits and a point. RFC 4180 quoting is understood: a quoted field may
/// hold commas, line ends and doubled quotes. A quote inside an unquoted field, text after a
/// closing quote and a quote never closed are refused as `malformed`: not a CSV file at all.
/// Lines end in `\n` or `\r\n`; a UTF-8 byte order mark is skipped; blank lines are ignored.
struct IndicatorCSVReader {
    /// The file's name in messages.
    let file: String
    /// The columns asked for, by name; a row's fields are read by their index here.
    let columns: [String]
    private let bytes: [UInt8]
    private var position = 0
    /// The line the next record starts on (1-based).
    private var nextLine = 1
    /// The line the current record starts on: the header is line 1.
    private(set) var lineNumber = 0
    /// The header's number of fields, which every row must have.
    private(set) var fieldCount = 0
    /// Where each of ``columns`` stands in a row.
    private var columnIndex: [Int] = []
    /// The current record's fields: `bytes[starts[k]..<ends[k]]`, outer quotes removed.
    private var starts: [Int] = []
    private var ends: [Int] = []
    /// Where the current record begins, for the message of a row cut short.
    private var recordStart = 0

    private static var comma: UInt8 { 0x2C }
    private static var newline: UInt8 { 0x0A }
    private static var carriageReturn: UInt8 { 0x0D }
    private static var quote: UInt8 { 0x22 }
    private static var point: UInt8 { 0x2E }
    private static var minus: UInt8 { 0x2D }

    /// Reads the header and finds `columns` in it, by name: their order is the file's.
    ///
    /// - Throws: `empty` for a file without a header, `missing-field` for a column the header lacks.
    init(_ data: Data, file: String, columns: [String]) throws(DataError) {
        self.file = file
        self.columns = columns
        bytes = [UInt8](data)
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { position = 3 }
        guard try readRecord() else { throw fileError(.empty, "the file is empty: no header") }
        var names: [String] = []
        for k in 0..<starts.count { names.append(text(ofField: k).trimmingCharacters(in: .whitespaces)) }
        var index: [Int] = []
        for column in columns {
            guard let found = names.firstIndex(of: column) else {
                throw fileError(.missingField, "the header has no column '\(column)' (a renamed column?)")
            }
            index.append(found)
        }
        columnIndex = index
        fieldCount = names.count
    }

    // MARK: - Records

    /// Moves to the next data row; `false` at the end of the file.
    ///
    /// - Throws: `malformed` for a row without the header's number of fields or broken quoting.
    mutating func next() throws(DataError) -> Bool {
        guard try readRecord() else { return false }
        guard starts.count == fieldCount else {
            throw lineError(.malformed, "\(starts.count) fields, the header has \(fieldCount) ('\(recordText)'): a row cut short, or not the file expected")
        }
        return true
    }

    /// Reads the next record that is not a blank line into `starts` and `ends`; `false` at the end.
    private mutating func readRecord() throws(DataError) -> Bool {
        let count = bytes.count
        while position < count {
            lineNumber = nextLine
            recordStart = position
            starts.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
            var i = position
            var quoted = false
            fields: while true {
                if i < count, bytes[i] == Self.quote {
                    // A quoted field: up to the quote not doubled; commas and line ends are text.
                    quoted = true
                    i += 1
                    let start = i
                    while true {
                        guard i < count else {
                            throw lineError(.malformed, "field \(starts.count + 1) opens a quote that is never closed")
                        }
                        let byte = bytes[i]
                        if byte == Self.quote {
                            if i + 1 < count, bytes[i + 1] == Self.quote {
                                i += 2
                                continue
                            }
                            break
                        }
                        if byte == Self.newline { nextLine += 1 }
                        i += 1
                    }
                    starts.append(start)
                    ends.append(i)
                    i += 1  // the closing quote
                    if i == count { break fields }
                    let byte = bytes[i]
                    if byte == Self.comma {
                        i += 1
                        continue fields
                    }
                    if byte == Self.newline {
                        i += 1
                        break fields
                    }
                    if byte == Self.carriageReturn, i + 1 == count || bytes[i + 1] == Self.newline {
                        i += min(2, count - i)
                        break fields
                    }
                    throw lineError(.malformed, "field \(starts.count) has text after its closing quote")
                }
                let start = i
                while i < count {
                    let byte = bytes[i]
                    if byte == Self.comma || byte == Self.newline || byte == Self.quote { break }
                    i += 1
                }
                if i < count, bytes[i] == Self.quote {
                    throw lineError(.malformed, "a quote inside the unquoted field \(starts.count + 1)")
                }
                let atLineEnd = i == count || bytes[i] == Self.newline
                var end = i
                if atLineEnd, end > start, bytes[end - 1] == Self.carriageReturn { end -= 1 }
                starts.append(start)
                ends.append(end)
                i += 1  // past the comma or the line end (past the file's end: clamped below)
                if atLineEnd { break fields }
            }
            position = min(i, count)
            nextLine += 1
            if !quoted, starts.count == 1, starts[0] == ends[0] { continue }  // a blank line
            return true
        }
        return false
    }

    /// The current record's first line, up to 120 bytes, for a message.
    private var recordText: String {
        var end = recordStart
        while end < bytes.count, end - recordStart < 120, bytes[end] != Self.newline { end += 1 }
        if end > recordStart, bytes[end - 1] == Self.carriageReturn { end -= 1 }
        return String(decoding: bytes[recordStart..<end], as: UTF8.self)
    }

    // MARK: - Fields

    /// The bytes of `column` (an index into ``columns``) in the current row.
    func field(_ column: Int) -> ArraySlice<UInt8> {
        let k = columnIndex[column]
        return bytes[starts[k]..<ends[k]]
    }

    /// Whether `column` holds exactly `text`.
    func field(_ column: Int, is text: String) -> Bool {
        field(column).elementsEqual(text.utf8)
    }

    /// `column` as text, a quoted field's doubled quotes undone.
    func text(_ column: Int) -> String {
        text(ofField: columnIndex[column])
    }

    private func text(ofField k: Int) -> String {
        let slice = bytes[starts[k]..<ends[k]]
        // Only a quoted field can hold a quote, and there each is doubled.
        guard slice.contains(Self.quote) else { return String(decoding: slice, as: UTF8.self) }
        var unescaped: [UInt8] = []
        var afterQuote = false
        for byte in slice {
            if byte == Self.quote, afterQuote {
                afterQuote = false
                continue
            }
            afterQuote = byte == Self.quote
            unescaped.append(byte)
        }
        return String(decoding: unescaped, as: UTF8.self)
    }

    /// `NA`, the files' missing value.
    private static func isMissing(_ slice: ArraySlice<UInt8>) -> Bool {
        slice.count == 2 && slice.first == 0x4E && slice.last == 0x41
    }

    /// `count` decimal digits from `from`, `nil` if one is not a digit.
    private static func digits(_ slice: ArraySlice<UInt8>, from: Int, count: Int) -> Int? {
        var value = 0
        for index in from..<(from + count) {
            let digit = Int(slice[index]) - 48
            guard digit >= 0, digit <= 9 else { return nil }
            value = value * 10 + digit
        }
        return value
    }

    /// `column` as a day `YYYY-MM-DD` of the years 2000...2099, in days since 1970-01-01.
    func day(_ column: Int) throws(DataError) -> Int {
        let slice = field(column)
        let s = slice.startIndex
        guard slice.count == 10, slice[s + 4] == Self.minus, slice[s + 7] == Self.minus,
              let year = Self.digits(slice, from: s, count: 4), let month = Self.digits(slice, from: s + 5, count: 2),
              let dayOfMonth = Self.digits(slice, from: s + 8, count: 2), (2000...2099).contains(year),
              let day = Day(year: year, month: month, day: dayOfMonth)
        else { throw invalid(column, "is not a day YYYY-MM-DD") }
        return day.daysSinceEpoch
    }

    /// `column` as a two-digit state id within `range` (`00` Germany, `01`...`16` the states).
    func state(_ column: Int, in range: ClosedRange<Int>) throws(DataError) -> Int {
        let slice = field(column)
        guard slice.count == 2, let id = Self.digits(slice, from: slice.startIndex, count: 2), range.contains(id) else {
            throw invalid(column, "out of range \(Self.stateID(range.lowerBound))..\(Self.stateID(range.upperBound))")
        }
        return id
    }

    /// `column` as a finite non-negative number; `nil` for `NA`.
    func number(_ column: Int) throws(DataError) -> Double? {
        let slice = field(column)
        if Self.isMissing(slice) { return nil }
        // Up to 15 digits with at most one point, as the RKI writes them: exact from the integer
        // and one division by an exact power of ten, rounded as `Double(String)` would. Anything
        // else (an exponent, say) is left to `Double(String)`.
        var mantissa: UInt64 = 0
        var digits = 0
        var fraction = -1
        var plain = true
        for byte in slice {
            if byte == Self.point {
                guard fraction < 0 else {
                    plain = false
                    break
                }
                fraction = 0
            } else if byte >= 0x30, byte <= 0x39 {
                mantissa = mantissa &* 10 &+ UInt64(byte - 0x30)
                digits += 1
                if fraction >= 0 { fraction += 1 }
            } else {
                plain = false
                break
            }
        }
        if plain, digits > 0, digits <= 15, fraction != 0 {
            return fraction < 0 ? Double(mantissa) : Double(mantissa) / RKIDistrictCSV.powerOfTen(fraction)
        }
        guard !slice.isEmpty, slice.count <= 40, let value = Double(String(decoding: slice, as: UTF8.self)),
              value.isFinite, value >= 0, value.sign == .plus
        else { throw invalid(column, "is not a number (one not negative, or NA)") }
        return value
    }

    /// `column` as a non-negative integer of up to 12 digits; `nil` for `NA`.
    func integer(_ column: Int) throws(DataError) -> Int? {
        let slice = field(column)
        if Self.isMissing(slice) { return nil }
        guard !slice.isEmpty, slice.count <= 12, let value = Self.digits(slice, from: slice.startIndex, count: slice.count) else {
            throw invalid(column, "is not a non-negative integer or NA")
        }
        return value
    }

    // MARK: - Errors

    /// An error of the file as a whole: `'file': text`.
    func fileError(_ reason: DataError.Reason, _ text: String) -> DataError {
        DataError(reason, "'\(file)': \(text)")
    }

    /// An error of the current row: `'file', line N: text`.
    func lineError(_ reason: DataError.Reason, _ text: String) -> DataError {
        DataError(reason, "'\(file)', line \(lineNumber): \(text)")
    }

    private func invalid(_ column: Int, _ what: String) -> DataError {
        let shown = String(decoding: field(column).prefix(40), as: UTF8.self)
        return lineError(.invalidValue, "\(columns[column]) '\(shown)' \(what)")
    }
}

// MARK: - Rows by day and state

extension IndicatorCSVReader {
    /// `9` -> `09`: a state id as the files write it (`00` for Germany).
    static func stateID(_ number: Int) -> String {
        number < 10 ? "0\(number)" : "\(number)"
    }

    /// The key of a day (days since 1970-01-01) and a state (0...31) in a table of rows.
    static func key(day: Int, state: Int) -> Int {
        day &* 32 &+ state
    }

    /// `entries` (by ``key(day:state:)``) as one array per state of `states`, in their order,
    /// with one entry per day of `days`: the files must be whole, a gap is not a missing value.
    ///
    /// - Throws: `missing-districts` naming the first day, then the first state, without an entry
    ///   ("2024-05-03 has no row for state 09" and `detail`).
    func byState<Entry>(_ entries: [Int: Entry], days: ClosedRange<Int>, states: ClosedRange<Int>,
                        detail: String) throws(DataError) -> [[Entry]] {
        var result = [[Entry]](repeating: [], count: states.count)
        for index in result.indices { result[index].reserveCapacity(days.count) }
        for day in days {
            for state in states {
                guard let entry = entries[Self.key(day: day, state: state)] else {
                    throw fileError(.missingDistricts, "\(Day(daysSinceEpoch: day)) has no row for state \(Self.stateID(state))\(detail)")
                }
                result[state - states.lowerBound].append(entry)
            }
        }
        return result
    }
}
