import Foundation
import Synchronization

// What RKIDistrictFile is built from and with: the real files it reads, civil days, the row writer.

/// The `00+` rows of the national file `COVID-19-Faelle_7-Tage-Inzidenz_Deutschland.csv`.
struct NationalFile: Sendable {
    private static let cache = Mutex<[String: NationalFile]>([:])

    /// The file of a shared data directory, read once per process and directory.
    static func cached(sharedData: URL) throws -> NationalFile {
        let key = sharedData.standardizedFileURL.path
        if let file = cache.withLock({ $0[key] }) { return file }
        let file = try NationalFile(sharedData: sharedData)
        cache.withLock { $0[key] = file }
        return file
    }

    /// Day number of `days[0]`; `days` has every day from there on.
    let firstDay: Int
    let days: [(incidence: Double, total: Int)]
    let population: Int

    var range: (first: String, last: String) {
        (CivilDay.string(firstDay), CivilDay.string(firstDay + days.count - 1))
    }

    init(sharedData: URL) throws {
        let url = sharedData.appendingPathComponent("rki-github/COVID-19-Faelle_7-Tage-Inzidenz_Deutschland.csv")
        let table = try CSVTable(url: url)
        let date = try table.column("Meldedatum"), group = try table.column("Altersgruppe")
        let population = try table.column("Bevoelkerung"), total = try table.column("Faelle_gesamt")
        let incidence = try table.column("Inzidenz_7-Tage")
        var byDay: [Int: (incidence: Double, total: Int)] = [:]
        var people = 0
        for row in table.rows where row[group] == "00+" {
            guard let day = CivilDay.number(row[date]), let value = Double(row[incidence]), let cases = Int(row[total]),
                  let count = Int(row[population]) else {
                throw FixtureError("a bad 00+ row in \(url.path): \(row.joined(separator: ","))")
            }
            byDay[day] = (value, cases)
            people = count
        }
        guard let first = byDay.keys.min(), let last = byDay.keys.max() else {
            throw FixtureError("\(url.path) has no 00+ rows")
        }
        var days: [(incidence: Double, total: Int)] = []
        days.reserveCapacity(last - first + 1)
        for day in first...last {
            guard let entry = byDay[day] else { throw FixtureError("\(url.path) lacks \(CivilDay.string(day))") }
            days.append(entry)
        }
        self.firstDay = first
        self.days = days
        self.population = people
    }
}

/// A plain CSV file (no quoting, as every file read here is): header names and rows of fields.
struct CSVTable {
    let header: [Substring]
    let rows: [[Substring]]
    let url: URL

    init(url: URL) throws {
        var text = try String(contentsOf: url, encoding: .utf8)
        if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
        var lines = text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
        guard !lines.isEmpty else { throw FixtureError("\(url.path) is empty") }
        let header = lines.removeFirst().split(separator: ",", omittingEmptySubsequences: false)
        rows = try lines.map { line in
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count == header.count else { throw FixtureError("a row of \(url.path) has \(fields.count) fields: \(line)") }
            return fields
        }
        self.header = header
        self.url = url
    }

    func column(_ name: String) throws -> Int {
        guard let index = header.firstIndex(where: { $0 == name }) else { throw FixtureError("\(url.path) has no column \(name)") }
        return index
    }
}

/// Proleptic Gregorian days as numbers (days since 1970-01-01), without Calendar or time zones.
///
/// The same arithmetic as `AmpelDomain.Day`, kept apart on purpose: the files built here are
/// what the tests check the data code against, so they must not share its date arithmetic (a
/// wrong day number in `Day` would then be written and read back the same, and pass).
package enum CivilDay {
    /// The day number of a strict `YYYY-MM-DD`, or `nil`.
    package static func number<S: StringProtocol>(_ text: S) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == 45, bytes[7] == 45 else { return nil }
        func digits(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                let byte = bytes[index]
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard let year = digits(0..<4), let month = digits(5..<7), let day = digits(8..<10),
              (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        return days(year: year, month: month, day: day)
    }

    /// `YYYY-MM-DD` of a day number.
    package static func string(_ number: Int) -> String {
        let (year, month, day) = civil(number)
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }

    package static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Howard Hinnant's days_from_civil.
    package static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Howard Hinnant's civil_from_days.
    package static func civil(_ number: Int) -> (year: Int, month: Int, day: Int) {
        let z = number + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// A fixed buffer for CSV rows, written with plain pointer stores: a 45 MB file is some 40
/// million byte writes, too slow through `Array.append` in a debug build.
final class ByteRows {
    /// More than the longest row: 10 + 5 + 4 numbers of at most 20 + an incidence + 7 separators.
    static let maxRow = 160

    let capacity: Int
    private(set) var count = 0
    private let base: UnsafeMutablePointer<UInt8>

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    /// Checks there is room for one more row (the appends themselves do not check).
    func reserveRow() {
        precondition(count + Self.maxRow <= capacity, "ByteRows overflow: drain before \(capacity) bytes")
    }

    func append(_ byte: UInt8) {
        base[count] = byte
        count += 1
    }

    func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { source in
            guard let start = source.baseAddress else { return }
            (base + count).update(from: start, count: source.count)
        }
        count += bytes.count
    }

    func appendInteger(_ value: Int) {
        if value < 0 { append(45) }
        var rest = value.magnitude
        var digits = 1
        var scale: UInt = 10
        while digits < 20, rest >= scale {
            digits += 1
            scale = scale.multipliedReportingOverflow(by: 10).partialValue
        }
        var position = count + digits - 1
        repeat {
            base[position] = 48 + UInt8(rest % 10)
            rest /= 10
            position -= 1
        } while rest > 0
        count += digits
    }

    /// An incidence given in tenths: `1111` is `111.1`, `1030` is `103`, `-5` is `-0.5`.
    func appendTenths(_ tenths: Int) {
        let whole = tenths.magnitude / 10, fraction = tenths.magnitude % 10
        if tenths < 0 { append(45) }
        appendInteger(Int(whole))
        if fraction != 0 {
            append(46)
            append(48 + UInt8(fraction))
        }
    }

    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try body(UnsafeBufferPointer(start: base, count: count))
    }

    /// Hands the bytes so far to `sink` and empties the buffer.
    func drain(into sink: (UnsafeBufferPointer<UInt8>) throws -> Void) rethrows {
        try sink(UnsafeBufferPointer(start: base, count: count))
        count = 0
    }
}

/// A fixture that cannot be built or served as asked (a missing data file, a bad day).
public struct FixtureError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
