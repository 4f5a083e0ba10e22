import AmpelDomain
import Foundation
import NIOCore

/// Reads the RKI's district file `COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.csv` while it
/// streams, in bounded memory, keeping only the newest days.
///
/// The file (about a million rows, 45 MB, regenerated daily) has one row per district and
/// reporting day: `Meldedatum,Landkreis_id,Bevoelkerung,Faelle_gesamt,Faelle_neu,
/// Faelle_7-Tage,Inzidenz_7-Tage`. Every row is checked (a bad number anywhere, a duplicate
/// district and day, a row with the wrong number of fields reject the whole file), but only
/// the rows of the last ``windowDays`` days before the newest `Meldedatum` seen so far are
/// kept, in a ring per district: memory is districts x window, whatever the file's size or
/// row order. The pseudo-districts `17000` and `u` belong to no district and are skipped and
/// counted, as are codes the district directory does not know.
///
/// ```swift
/// var reader = RKIDistrictCSV(windowDays: 28)
/// for chunk in body { try chunk.withUnsafeBytes { try reader.consume($0) } }
/// let table = try reader.finish(region: .bavaria)
/// ```
public struct RKIDistrictCSV: Sendable {
    /// The columns the file must have, by name; their order is taken from the header.
    public static let columns = ["Meldedatum", "Landkreis_id", "Bevoelkerung", "Faelle_gesamt", "Faelle_neu",
                                 "Faelle_7-Tage", "Inzidenz_7-Tage"]

    /// What the file holds for the days kept.
    public struct Table: Sendable {
        /// The newest `Meldedatum` of the file: the data day.
        public let newestDay: Day
        /// One dataset per day kept, oldest first, ending with ``newestDay``.
        public let datasets: [Dataset]
        /// Data rows read.
        public let rows: Int
        /// Rows of `17000`, `u` and unknown codes, skipped.
        public let skippedRows: Int
        /// The codes skipped, for the log.
        public let skippedCodes: [String]
    }

    /// How many days up to the newest one are kept.
    public let windowDays: Int
    private let directory: DistrictDirectory
    private let source: String

    // The byte-level state.
    private var carry: [UInt8] = []
    private var lineNumber = 0
    private var sawBOMCheck = false
    private var fieldIndex: [Int] = []  // position of each of `columns` in a row
    private var fieldCount = 0

    // The last date text seen and its day, since rows come sorted by day.
    private var lastDateBytes: (UInt64, UInt16) = (0, 0)
    private var lastDay: Int32 = .min

    // Districts: code (0...99999) -> slot; per slot a ring of `windowDays` entries.
    private var slotOfCode: [Int32]
    private var codeOfSlot: [String] = []
    private var ring: [Entry] = []
    private var seenDays: [[UInt64]] = []  // per slot, a bit per day since `baseDay`
    private var newest: Int32 = .min
    private var rows = 0
    private var skipped = 0
    private var skippedCodes: Set<String> = []

    private struct Entry: Sendable {
        var day: Int32 = .min
        var incidence: Double = 0
        var population: Int32 = 0
        var cases7: Int32 = 0
    }

    /// The first day the duplicate check can tell apart (the data starts in 2020).
    private static let baseDay: Int32 = Int32(Day(year: 2000, month: 1, day: 1)!.daysSinceEpoch)

    /// - Parameters:
    ///   - windowDays: how many days up to the newest one to keep (the history's length).
    ///   - directory: the districts the codes are joined with.
    ///   - source: what the datasets' `source` says.
    public init(windowDays: Int, directory: DistrictDirectory = .germany, source: String = "rki") {
        self.windowDays = max(1, windowDays)
        self.directory = directory
        self.source = source
        slotOfCode = [Int32](repeating: -1, count: 100_000)
    }

    /// Reads a chunk of the file; lines may be split across chunks anywhere.
    ///
    /// - Throws: ``DataError`` at the first row that is not valid, naming its line.
    public mutating func consume(_ chunk: UnsafeRawBufferPointer) throws(DataError) {
        guard let base = chunk.baseAddress, chunk.count > 0 else { return }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var start = 0
        let end = chunk.count
        if !carry.isEmpty {
            // Complete the line begun in an earlier chunk.
            guard let newline = memchr(bytes, 0x0A, end) else {
                carry.append(contentsOf: UnsafeBufferPointer(start: bytes, count: end))
                try checkCarryLength()
                return
            }
            let length = UnsafeRawPointer(newline) - UnsafeRawPointer(bytes)
            carry.append(contentsOf: UnsafeBufferPointer(start: bytes, count: length))
            let line = carry
            carry.removeAll(keepingCapacity: true)
            try completeLine(line)
            start = length + 1
        }
        while start < end {
            guard let newline = memchr(bytes + start, 0x0A, end - start) else {
                carry.append(contentsOf: UnsafeBufferPointer(start: bytes + start, count: end - start))
                try checkCarryLength()
                return
            }
            let length = UnsafeRawPointer(newline) - UnsafeRawPointer(bytes + start)
            try line(bytes + start, length)
            start += length + 1
        }
    }

    /// Reads a chunk held in `Data`.
    public mutating func consume(_ data: Data) throws(DataError) {
        // A closure with typed throws handed to `withUnsafeBytes` crashes the 6.3 compiler: the error goes out by hand.
        var failure: DataError?
        data.withUnsafeBytes { bytes in
            do throws(DataError) { try self.consume(bytes) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Reads a chunk of a response body.
    public mutating func consume(_ buffer: ByteBuffer) throws(DataError) {
        var failure: DataError?
        buffer.withUnsafeReadableBytes { bytes in
            do throws(DataError) { try self.consume(bytes) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private func checkCarryLength() throws(DataError) {
        if carry.count > 4096 {
            throw DataError(.malformed, "line \(lineNumber + 1) is longer than 4096 bytes: not the RKI's district file")
        }
    }

    /// Ends the file and checks it as a whole.
    ///
    /// - Parameter region: the districts that must all have a row on the newest day.
    /// - Throws: ``DataError`` `empty` (no data rows), `missing-districts` (a district of the
    ///   region has no row on the newest day), or the row errors of a last line without a line end.
    public mutating func finish(region: Region) throws(DataError) -> Table {
        if !carry.isEmpty {
            let line = carry
            carry.removeAll()
            try completeLine(line)
        }
        guard fieldCount > 0 else { throw DataError(.empty, "the file is empty: no header") }
        guard rows > skipped, newest != .min else {
            throw DataError(.empty, "the file has a header but no district rows")
        }
        let newestDay = Day(daysSinceEpoch: Int(newest))
        var missing: [String] = []
        for district in directory.districts(in: region) {
            let slot = slotOfCode[Int(district.ags)!]
            if slot < 0 || ring[Int(slot) * windowDays + Int(newest) % windowDays].day != newest {
                missing.append(district.ags)
            }
        }
        if !missing.isEmpty {
            let named = missing.prefix(5).map { code in directory[code].map { "\(code) \($0.name)" } ?? code }
            throw DataError(.missingDistricts, "\(missing.count) of the \(region.districtCount) districts of \(region.name) have no row for the newest day \(newestDay): \(named.joined(separator: ", "))\(missing.count > 5 ? ", ..." : "")")
        }
        var datasets: [Dataset] = []
        let first = max(Int(newest) - windowDays + 1, Int(Self.baseDay))
        for dayNumber in first...Int(newest) {
            var districts: [String: DistrictIncidence] = [:]
            var stateCases: [Substring: (cases: Int, population: Int)] = [:]
            var entries: [(District, Entry)] = []
            for (slot, code) in codeOfSlot.enumerated() {
                let entry = ring[slot * windowDays + dayNumber % windowDays]
                guard entry.day == dayNumber, let known = directory[code] else { continue }
                let district = District(ags: code, name: known.name, shortName: known.shortName, kind: known.kind,
                                        state: known.state, population: entry.population > 0 ? Int(entry.population) : nil)
                entries.append((district, entry))
                stateCases[district.stateCode, default: (0, 0)].cases += Int(entry.cases7)
                stateCases[district.stateCode, default: (0, 0)].population += Int(entry.population)
            }
            guard !entries.isEmpty else { continue }
            for (district, entry) in entries {
                let state = stateCases[district.stateCode].flatMap { $0.population > 0 ? Self.rounded(Double($0.cases) * 100_000 / Double($0.population)) : nil }
                districts[district.ags] = DistrictIncidence(district: district, incidence: entry.incidence, stateIncidence: state)
            }
            datasets.append(Dataset(date: Day(daysSinceEpoch: dayNumber), source: source, districts: districts))
        }
        return Table(newestDay: newestDay, datasets: datasets, rows: rows, skippedRows: skipped,
                     skippedCodes: skippedCodes.sorted())
    }

    /// The state's incidence to one decimal, as the RKI writes the districts'.
    static func rounded(_ value: Double) -> Double { (value * 10).rounded() / 10 }

    // MARK: - One line

    private mutating func completeLine(_ line: [UInt8]) throws(DataError) {
        var failure: DataError?
        line.withUnsafeBufferPointer { buffer in
            do throws(DataError) { try self.line(buffer.baseAddress!, buffer.count) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private mutating func line(_ start: UnsafePointer<UInt8>, _ rawLength: Int) throws(DataError) {
        lineNumber += 1
        var p = start
        var length = rawLength
        if length > 0, p[length - 1] == 0x0D { length -= 1 }
        if lineNumber == 1 {
            if length >= 3, p[0] == 0xEF, p[1] == 0xBB, p[2] == 0xBF {
                p += 3
                length -= 3
            }
            try header(String(decoding: UnsafeBufferPointer(start: p, count: length), as: UTF8.self))
            return
        }
        guard length > 0 else { return }
        try row(p, length)
    }

    private mutating func header(_ text: String) throws(DataError) {
        let names = text.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        }
        var index: [Int] = []
        for column in Self.columns {
            guard let position = names.firstIndex(of: column) else {
                throw DataError(.missingField, "the header has no column '\(column)' (it reads '\(text.prefix(200))'): not the RKI's district file, or a renamed column")
            }
            index.append(position)
        }
        fieldIndex = index
        fieldCount = names.count
    }

    /// Field boundaries of one row, reused.
    private var starts = [Int](repeating: 0, count: 16)
    private var ends = [Int](repeating: 0, count: 16)

    private mutating func row(_ p: UnsafePointer<UInt8>, _ length: Int) throws(DataError) {
        guard fieldCount > 0 else { throw DataError(.empty, "the file is empty: no header") }
        if starts.count < fieldCount + 1 {
            starts = [Int](repeating: 0, count: fieldCount + 1)
            ends = starts
        }
        var field = 0
        var fieldStart = 0
        var i = 0
        while i < length {
            if p[i] == 0x2C {  // ,
                guard field < fieldCount - 1 else { throw fieldsError(length: length, p) }
                starts[field] = fieldStart
                ends[field] = i
                field += 1
                fieldStart = i + 1
            }
            i += 1
        }
        starts[field] = fieldStart
        ends[field] = length
        guard field == fieldCount - 1 else { throw fieldsError(length: length, p) }
        // Surrounding quotes, as CSV writers may add them.
        for f in 0..<fieldCount where ends[f] - starts[f] >= 2 && p[starts[f]] == 0x22 && p[ends[f] - 1] == 0x22 {
            starts[f] += 1
            ends[f] -= 1
        }
        rows += 1

        let dateField = fieldIndex[0]
        let day = try self.day(p + starts[dateField], ends[dateField] - starts[dateField])
        let idField = fieldIndex[1]
        let idLength = ends[idField] - starts[idField]
        let id = p + starts[idField]
        let population = try integer(p, 2)
        _ = try integer(p, 3)
        _ = try integer(p, 4)
        let cases7 = try integer(p, 5)
        let incidence = try decimal(p, 6)

        var code = -1
        if idLength == 5 {
            code = 0
            for k in 0..<5 {
                let digit = Int(id[k]) &- 48
                guard digit >= 0, digit <= 9 else { code = -1; break }
                code = code * 10 + digit
            }
        }
        var slot: Int32 = code >= 0 ? slotOfCode[code] : -1
        if slot < 0 {
            let text = String(decoding: UnsafeBufferPointer(start: id, count: idLength), as: UTF8.self)
            guard code >= 0, directory[text] != nil else {
                // `17000` (no district), `u` (unknown) or a code the directory does not know.
                guard !text.isEmpty else { throw DataError(.invalidValue, "line \(lineNumber): Landkreis_id is empty") }
                skipped += 1
                if skippedCodes.count < 20 { skippedCodes.insert(text) }
                return
            }
            slot = Int32(codeOfSlot.count)
            slotOfCode[code] = slot
            codeOfSlot.append(text)
            ring.append(contentsOf: repeatElement(Entry(), count: windowDays))
            seenDays.append([])
        }
        let s = Int(slot)
        // Every row is checked for a duplicate, kept or not: one bit per district and day.
        let offset = Int(day - Self.baseDay)
        let word = offset >> 6, bit = UInt64(1) << UInt64(offset & 63)
        if seenDays[s].count <= word { seenDays[s].append(contentsOf: repeatElement(0, count: word + 64 - seenDays[s].count)) }
        guard seenDays[s][word] & bit == 0 else {
            throw DataError(.duplicateDistrict, "line \(lineNumber): district \(codeOfSlot[s]) has a second row for \(Day(daysSinceEpoch: Int(day)))")
        }
        seenDays[s][word] |= bit
        if day > newest { newest = day }
        guard Int(day) > Int(newest) - windowDays else { return }
        let position = s * windowDays + Int(day) % windowDays
        if ring[position].day < day {
            ring[position] = Entry(day: day, incidence: incidence, population: Int32(clamping: population), cases7: Int32(clamping: cases7))
        }
    }

    private func fieldsError(length: Int, _ p: UnsafePointer<UInt8>) -> DataError {
        let text = String(decoding: UnsafeBufferPointer(start: p, count: min(length, 120)), as: UTF8.self)
        let count = UnsafeBufferPointer(start: p, count: length).reduce(1) { $0 + ($1 == 0x2C ? 1 : 0) }
        return DataError(.malformed, "line \(lineNumber): \(count) fields, the header has \(fieldCount) ('\(text)'): a row cut short or not the RKI's district file")
    }

    private mutating func day(_ p: UnsafePointer<UInt8>, _ length: Int) throws(DataError) -> Int32 {
        guard length == 10 else { throw badField(0, p, length) }
        let raw = UnsafeRawPointer(p)
        let key = (raw.loadUnaligned(as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt16.self))
        if key == lastDateBytes { return lastDay }
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
              let parsed = Day(year: year, month: month, day: dayOfMonth), (2000...2099).contains(year)
        else { throw badField(0, p, length) }
        lastDateBytes = key
        lastDay = Int32(parsed.daysSinceEpoch)
        return lastDay
    }

    /// A non-negative integer field (column `index` of ``columns``).
    private func integer(_ row: UnsafePointer<UInt8>, _ index: Int) throws(DataError) -> Int {
        let f = fieldIndex[index]
        let p = row + starts[f], length = ends[f] - starts[f]
        guard length > 0, length <= 12 else { throw badField(index, p, length) }
        var value = 0
        for k in 0..<length {
            let digit = Int(p[k]) &- 48
            guard digit >= 0, digit <= 9 else { throw badField(index, p, length) }
            value = value * 10 + digit
        }
        return value
    }

    /// A non-negative decimal field: digits with an optional fraction, as the RKI writes them
    /// (`0`, `12.3`); anything else `strtod` reads as a finite non-negative number is taken too.
    private func decimal(_ row: UnsafePointer<UInt8>, _ index: Int) throws(DataError) -> Double {
        let f = fieldIndex[index]
        let p = row + starts[f], length = ends[f] - starts[f]
        guard length > 0, length <= 40 else { throw badField(index, p, length) }
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
        guard consumed == length, value.isFinite, value >= 0 else { throw badField(index, p, length) }
        return value
    }

    private static let powersOfTen: [Double] = (0...22).map { pow(10, Double($0)) }

    private func badField(_ index: Int, _ p: UnsafePointer<UInt8>, _ length: Int) -> DataError {
        let text = String(decoding: UnsafeBufferPointer(start: p, count: min(length, 40)), as: UTF8.self)
        let what = index == 0 ? "a day YYYY-MM-DD" : index == 6 ? "a non-negative number" : "a non-negative integer"
        return DataError(.invalidValue, "line \(lineNumber): \(Self.columns[index]) '\(text)' is not \(what)")
    }
}
