import AmpelDomain
import Foundation

/// Reads the RKI's district file `COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.csv` while it
/// streams, in bounded memory, keeping only the newest days.
///
/// The file (about a million rows, 40-45 MB, regenerated daily) has one row per district and
/// reporting day: `Meldedatum,Landkreis_id,Bevoelkerung,Faelle_gesamt,Faelle_neu,
/// Faelle_7-Tage,Inzidenz_7-Tage`. Every row is checked (a bad number anywhere, a duplicate
/// district and day, a row with the wrong number of fields reject the whole file), but only
/// the rows of the last ``windowDays`` days before the newest `Meldedatum` seen so far are
/// kept, in a ring per district: memory is districts x window, whatever the file's size or
/// row order. The pseudo-districts `17000` and `u` belong to no district and are skipped and
/// counted, as are codes the district directory does not know.
///
/// One pass over the bytes finds the line end and the commas together; the storage is
/// allocated once, for the directory's districts, so a row allocates nothing (the reader ran
/// at 212 MB/s with per-row array updates, DESIGN 15).
///
/// ```swift
/// let reader = RKIDistrictCSV(windowDays: 28)
/// for chunk in body { try reader.consume(chunk) }
/// let table = try reader.finish(region: .bavaria)
/// ```
///
/// > Note: A reader reads one file; it is not for sharing between tasks.
public final class RKIDistrictCSV {
    /// The columns the file must have, by name; their order is taken from the header.
    public static let columns = ["Meldedatum", "Landkreis_id", "Bevoelkerung", "Faelle_gesamt", "Faelle_neu",
                                 "Faelle_7-Tage", "Inzidenz_7-Tage"]

    /// What the file holds for the days kept.
    public struct Table: Sendable {
        /// The newest `Meldedatum` of the file: the data day.
        public let newestDay: Day
        /// One dataset per day kept, oldest first, ending with ``newestDay``: every district on the
        /// newest day, the region's on the days before.
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
    /// The directory's codes; a district's slot is its index here.
    private let codes: [String]

    /// Code (0...99999) -> slot, -1 for none.
    private let slotOfCode: UnsafeMutablePointer<Int16>
    /// The number of slots (the directory's districts, at least 1).
    private let slots: Int
    /// `windowDays` rows of ``slots`` entries: a day's row at `day % windowDays`, a district's
    /// entry at its slot in it. Day-major, as the file is sorted: one day's 400 rows write
    /// neighbouring entries instead of 400 lines of memory apart.
    private let ring: UnsafeMutablePointer<Entry>
    /// `seenWords` rows of ``slots`` words, a bit per district and day since ``baseDay`` for the
    /// duplicate check: word `(day - baseDay) / 64` of every district side by side, for the
    /// same reason (slot-major, each row touched its own cache line: 7 % of the reader's time
    /// stood on that load in perf).
    private var seen: UnsafeMutablePointer<UInt64>
    private var seenWords: Int

    private var carry: [UInt8] = []
    var lineNumber = 0
    /// The position of each of ``columns`` in a row, and the header's number of fields.
    private let columnIndex: UnsafeMutablePointer<Int>
    var fieldCount = 0
    /// Field boundaries of the current row (start, end pairs).
    private var bounds: UnsafeMutablePointer<Int>
    private var boundsCapacity = 16

    // The last date text seen and its day: rows come sorted by day.
    var lastDateKey: (UInt64, UInt16) = (0, 0)
    var lastDay: Int32 = .min
    private var newest: Int32 = .min
    private var rows = 0
    private var skipped = 0
    private var skippedCodes: Set<String> = []

    private struct Entry {
        var day: Int32
        var population: Int32
        var cases7: Int32
        var incidence: Double
    }

    /// The first day the duplicate check can tell apart (the data starts in 2020).
    /// 2000-01-01 in days since 1970 (a literal: a computed `static let` costs a `swift_once`
    /// check on every row; RKIDistrictCSVTests checks it against `Day`).
    static let baseDay: Int32 = 10_957

    /// - Parameters:
    ///   - windowDays: how many days up to the newest one to keep (the history's length).
    ///   - directory: the districts the codes are joined with.
    ///   - source: what the datasets' `source` says.
    public init(windowDays: Int, directory: DistrictDirectory = .germany, source: String = "rki") {
        self.windowDays = max(1, windowDays)
        self.directory = directory
        self.source = source
        codes = directory.codes
        slotOfCode = .allocate(capacity: 100_000)
        slotOfCode.initialize(repeating: -1, count: 100_000)
        for (slot, code) in codes.enumerated() {
            if let number = Int(code), (0..<100_000).contains(number) { slotOfCode[number] = Int16(slot) }
        }
        slots = max(1, codes.count)
        ring = .allocate(capacity: slots * self.windowDays)
        ring.initialize(repeating: Entry(day: .min, population: 0, cases7: 0, incidence: 0), count: slots * self.windowDays)
        // 2000..2031 to start with; grown when a later day comes.
        seenWords = 180
        seen = .allocate(capacity: slots * seenWords)
        seen.initialize(repeating: 0, count: slots * seenWords)
        bounds = .allocate(capacity: 2 * boundsCapacity)
        columnIndex = .allocate(capacity: Self.columns.count)
        columnIndex.initialize(repeating: 0, count: Self.columns.count)
    }

    deinit {
        columnIndex.deallocate()
        slotOfCode.deallocate()
        ring.deallocate()
        seen.deallocate()
        bounds.deallocate()
    }

    /// Reads a chunk held in `Data`.
    public func consume(_ data: Data) throws(DataError) {
        // A closure with typed throws handed to `withUnsafeBytes` crashes the 6.3 compiler: the error goes out by hand.
        var failure: DataError?
        data.withUnsafeBytes { bytes in
            do throws(DataError) { try self.consume(bytes) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Reads a chunk of the file; lines may be split across chunks anywhere.
    ///
    /// - Throws: ``DataError`` at the first row that is not valid, naming its line.
    public func consume(_ chunk: UnsafeRawBufferPointer) throws(DataError) {
        guard let base = chunk.baseAddress, chunk.count > 0 else { return }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        let end = chunk.count
        var start = 0
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
            guard fieldCount > 0 else {
                // The header: found by `memchr`, read as text.
                guard let newline = memchr(bytes + start, 0x0A, end - start) else { break }
                let length = UnsafeRawPointer(newline) - UnsafeRawPointer(bytes + start)
                try line(bytes + start, length)
                start += length + 1
                continue
            }
            let (found, commas, quoted) = scan(bytes, from: start, to: end)
            guard let lineEnd = found else { break }
            lineNumber += 1
            try row(bytes, from: start, to: lineEnd, commas: commas, quoted: quoted)
            start = lineEnd + 1
        }
        if start < end {
            carry.append(contentsOf: UnsafeBufferPointer(start: bytes + start, count: end - start))
            try checkCarryLength()
        }
    }

    /// The high bit of each byte of `word` that may be `,`, `\n` or `"` (little-endian: byte 0
    /// lowest). A flagged byte is checked by the caller: the borrow of the zero-byte test can
    /// flag a byte above a true match, never miss one.
    @inline(__always)
    static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func equal(_ byte: UInt64) -> UInt64 {
            let x = word ^ (byte &* ones)
            return (x &- ones) & ~x & highs
        }
        return equal(0x2C) | equal(0x0A) | equal(0x22)
    }

    /// One pass from `start`: the first line end before `end` (`nil` without one), and the
    /// commas before it (their positions in ``bounds``) and whether a quote came; eight bytes a step.
    @inline(__always)
    private func scan(_ bytes: UnsafePointer<UInt8>, from start: Int, to end: Int) -> (lineEnd: Int?, commas: Int, quoted: Bool) {
        var i = start
        var commas = 0
        var quoted = false
        let limit = boundsCapacity
        while i + 8 <= end {
            var candidates = Self.specialBytes(UnsafeRawPointer(bytes + i).loadUnaligned(as: UInt64.self))
            while candidates != 0 {
                let position = i + candidates.trailingZeroBitCount >> 3
                let byte = bytes[position]
                if byte == 0x2C {
                    if commas < limit { bounds[commas] = position }
                    commas += 1
                } else if byte == 0x0A {
                    return (position, commas, quoted)
                } else if byte == 0x22 {
                    quoted = true
                }  // else a byte the word test flagged wrongly
                candidates &= candidates &- 1
            }
            i += 8
        }
        while i < end {
            let byte = bytes[i]
            if byte == 0x2C {
                if commas < limit { bounds[commas] = i }
                commas += 1
            } else if byte == 0x0A {
                return (i, commas, quoted)
            } else if byte == 0x22 {
                quoted = true
            }
            i += 1
        }
        return (nil, commas, quoted)
    }

    private func checkCarryLength() throws(DataError) {
        if carry.count > 4096 {
            throw DataError(.malformed, "line \(lineNumber + 1) is longer than 4096 bytes: not the RKI's district file")
        }
    }

    private func completeLine(_ line: [UInt8]) throws(DataError) {
        var failure: DataError?
        line.withUnsafeBufferPointer { buffer in
            do throws(DataError) { try self.line(buffer.baseAddress!, buffer.count) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// A whole line on its own (the header, a line that spanned chunks, the last line).
    private func line(_ p: UnsafePointer<UInt8>, _ length: Int) throws(DataError) {
        if fieldCount == 0 {
            lineNumber += 1
            var p = p
            var length = length
            if length > 0, p[length - 1] == 0x0D { length -= 1 }
            if length >= 3, p[0] == 0xEF, p[1] == 0xBB, p[2] == 0xBF {
                p += 3
                length -= 3
            }
            try header(String(decoding: UnsafeBufferPointer(start: p, count: length), as: UTF8.self))
            return
        }
        let (_, commas, quoted) = scan(p, from: 0, to: length)
        lineNumber += 1
        try row(p, from: 0, to: length, commas: commas, quoted: quoted)
    }

    private func header(_ text: String) throws(DataError) {
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
        for (column, position) in index.enumerated() { columnIndex[column] = position }
        fieldCount = names.count
        if fieldCount > boundsCapacity {
            bounds.deallocate()
            boundsCapacity = fieldCount
            bounds = .allocate(capacity: 2 * boundsCapacity)
        }
    }

    // MARK: - One row

    /// A data row between `from` and `to` (the line end); `bounds` holds its comma positions.
    private func row(_ p: UnsafePointer<UInt8>, from: Int, to rawEnd: Int, commas: Int, quoted: Bool) throws(DataError) {
        var end = rawEnd
        if end > from, p[end - 1] == 0x0D { end -= 1 }
        guard end > from else { return }  // an empty line
        guard commas == fieldCount - 1 else { throw fieldsError(p + from, end - from, commas: commas) }
        rows += 1
        // Field k runs from after comma k-1 (the line start for the first) to comma k (the line
        // end for the last); only the seven columns read are looked up.
        let last = fieldCount - 1
        let commaAt = bounds
        let columns = columnIndex
        @inline(__always) func field(_ column: Int) -> (UnsafePointer<UInt8>, Int) {
            let k = columns[column]
            var low = k == 0 ? from : commaAt[k - 1] + 1
            var high = k == last ? end : commaAt[k]
            if quoted, high - low >= 2, p[low] == 0x22, p[high - 1] == 0x22 {
                low += 1
                high -= 1
            }
            return (p + low, high - low)
        }

        let (dateText, dateLength) = field(0)
        let day = try self.day(dateText, dateLength)
        let (id, idLength) = field(1)
        let population = try integer(field(2), column: 2)
        _ = try integer(field(3), column: 3)
        _ = try integer(field(4), column: 4)
        let cases7 = try integer(field(5), column: 5)
        let incidence = try decimal(field(6))

        var slot = -1
        if idLength == 5 {
            var code = 0
            var valid = true
            for k in 0..<5 {
                let digit = Int(id[k]) &- 48
                if digit < 0 || digit > 9 { valid = false }
                code = code &* 10 &+ digit
            }
            if valid { slot = Int(slotOfCode[code]) }
        }
        guard slot >= 0 else {
            // `17000` (no district), `u` (unknown) or a code the directory does not know.
            guard idLength > 0 else { throw DataError(.invalidValue, "line \(lineNumber): Landkreis_id is empty") }
            skipped += 1
            if skippedCodes.count < 20 { skippedCodes.insert(String(decoding: UnsafeBufferPointer(start: id, count: idLength), as: UTF8.self)) }
            return
        }
        // Every row is checked for a duplicate, kept or not: one bit per district and day.
        let offset = Int(day - Self.baseDay)
        if offset >> 6 >= seenWords { growSeen(toHold: offset) }
        let word = seen + (offset >> 6) * slots + slot
        let bit = UInt64(1) << UInt64(offset & 63)
        guard word.pointee & bit == 0 else {
            throw DataError(.duplicateDistrict, "line \(lineNumber): district \(codes[slot]) has a second row for \(Day(daysSinceEpoch: Int(day)))")
        }
        word.pointee |= bit
        if day > newest { newest = day }
        guard Int(day) > Int(newest) - windowDays else { return }
        let entry = ring + Int(day) % windowDays * slots + slot
        if entry.pointee.day < day {
            entry.pointee = Entry(day: day, population: Int32(clamping: population), cases7: Int32(clamping: cases7), incidence: incidence)
        }
    }

    /// Room in the duplicate bits for the day `offset` days after ``baseDay``.
    private func growSeen(toHold offset: Int) {
        let words = (offset >> 6) + 64
        let grown = UnsafeMutablePointer<UInt64>.allocate(capacity: slots * words)
        // Day-major: the old words are the first rows as they are; the new rows start empty.
        grown.initialize(from: seen, count: slots * seenWords)
        (grown + slots * seenWords).initialize(repeating: 0, count: slots * (words - seenWords))
        seen.deallocate()
        seen = grown
        seenWords = words
    }

    // MARK: - The end

    /// Ends the file and checks it as a whole.
    ///
    /// - Parameter region: the districts that must all have a row on the newest day.
    /// - Throws: ``DataError`` `empty` (no data rows), `missing-districts` (a district of the
    ///   region has no row on the newest day), or the row errors of a last line without a line end.
    public func finish(region: Region) throws(DataError) -> Table {
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
            let slot = Int(slotOfCode[Int(district.ags)!])
            if slot < 0 || ring[Int(newest) % windowDays * slots + slot].day != newest {
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
            var entries: [(District, Entry)] = []
            var states: [Substring: (cases: Int, population: Int)] = [:]
            for (slot, code) in codes.enumerated() {
                let entry = ring[dayNumber % windowDays * slots + slot]
                guard entry.day == dayNumber, let known = directory[code] else { continue }
                let district = District(ags: code, name: known.name, shortName: known.shortName, kind: known.kind,
                                        state: known.state, population: entry.population > 0 ? Int(entry.population) : nil)
                entries.append((district, entry))
                states[district.stateCode, default: (0, 0)].cases += Int(entry.cases7)
                states[district.stateCode, default: (0, 0)].population += Int(entry.population)
            }
            guard !entries.isEmpty else { continue }
            // The days before the newest serve the region's trend and day counts only: the other
            // districts' past is left out (a Bavarian rule set keeps 96 of the 400 a day).
            let isNewest = dayNumber == Int(newest)
            let kept = isNewest ? entries : entries.filter { region.contains(ags: $0.0.ags) }
            // Sized for what is kept: a past day reserved for all 400 held 28 tables of 512
            // slots of about 250 bytes (3.7 MB of a 6.2 MB heap peak, heaptrack) for 96 entries.
            var districts: [String: DistrictIncidence] = [:]
            districts.reserveCapacity(kept.count)
            for (district, entry) in kept {
                let state = states[district.stateCode].flatMap { $0.population > 0 ? Self.rounded(Double($0.cases) * 100_000 / Double($0.population)) : nil }
                districts[district.ags] = DistrictIncidence(district: district, incidence: entry.incidence, stateIncidence: state)
            }
            datasets.append(Dataset(date: Day(daysSinceEpoch: dayNumber), source: source, districts: districts))
        }
        return Table(newestDay: newestDay, datasets: datasets, rows: rows, skippedRows: skipped,
                     skippedCodes: skippedCodes.sorted())
    }

    /// The state's incidence to one decimal, as the RKI writes the districts'.
    static func rounded(_ value: Double) -> Double { (value * 10).rounded() / 10 }
}
