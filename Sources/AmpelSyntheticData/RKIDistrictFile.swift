import Foundation
import Synchronization

/// A generator of the RKI district file `COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.csv`
/// (dataset "COVID-19_7-Tage-Inzidenz_in_Deutschland") built from real data.
///
/// - District ids: the table schema's `Landkreis_id` enum (400 districts), plus a row for each
///   of the pseudo-ids `17000` and `u` every day.
/// - Bavarian districts (`09…`) on 2020-11-18...2021-11-22: the RKI's fixed per-day values
///   bundled with AmpelData, and their population `ewz_rki_2019`.
/// - Every other district and day: the national `00+` incidence of that day times a fixed
///   per-district factor in [0.5, 1.5], and a population derived from the id (both
///   deterministic, so two runs write the same bytes).
///
/// Rows are sorted by `Meldedatum` then `Landkreis_id`, LF line ends, no quoting, the
/// incidence with at most one decimal and no trailing `.0` (as the national file writes it).
/// Every stored incidence is already the written one: ``incidence(day:id:)`` equals the value a
/// parser reads back from the file, and equals `Double(format(x))` for whatever `x` was set.
///
/// ```swift
/// var file = try RKIDistrictFile(from: "2021-11-20", to: "2021-11-22")
/// file.set(day: "2021-11-22", id: "09162", incidence: 50)
/// file.remove(day: "2021-11-22", id: "09161")
/// server.serveFile(file.render())
/// ```
public struct RKIDistrictFile: Sendable {
    /// The file's header line (without its line end).
    public static let header = "Meldedatum,Landkreis_id,Bevoelkerung,Faelle_gesamt,Faelle_neu,Faelle_7-Tage,Inzidenz_7-Tage"

    /// The file's name in the RKI's repository.
    public static let fileName = "COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.csv"

    /// The pseudo-ids the file carries besides real districts: `17000` and `u` (unknown).
    public static let pseudoIDs = ["17000", "u"]

    /// The first and last day of the bundled Bavarian per-day history.
    public static let bavarianHistory = (first: "2020-11-18", last: "2021-11-22")

    /// The order rows are written in.
    public enum Order: Sendable {
        /// By `Meldedatum`, then `Landkreis_id`: the RKI's order.
        case byDay
        /// By `Landkreis_id`, then `Meldedatum`: a valid file in an order the RKI does not use.
        case byDistrict
    }

    /// Every day of the file, oldest first, as `YYYY-MM-DD`.
    public let days: [String]
    /// Every `Landkreis_id` of a day, in the file's order: the 400 districts, `17000`, `u`.
    public let districtIDs: [String]

    private let firstDay: Int
    private let dayBytes: [[UInt8]]
    private let idBytes: [[UInt8]]
    private let idHashes: [UInt64]
    private let idIndex: [String: Int]
    private let populations: [Int]
    private let populationBytes: [[UInt8]]
    /// Cases before the first day, so `Faelle_gesamt` starts at a plausible level.
    private let baseCases: [Int]
    /// Incidences in tenths (the written value exactly), `[day * districtIDs.count + district]`.
    private var tenths: [Int]
    /// How often each row is written: 0 removed, 1 normal, 2 or more duplicated.
    private var copies: [UInt8]

    /// Builds the file for the days `from...to` (inclusive, `YYYY-MM-DD`).
    ///
    /// - Parameter sharedData: the shared data directory; `nil` for ``sharedDataDirectory()``.
    /// - Throws: ``FixtureError`` for a malformed day, `to` before `from`, a day outside the
    ///   national file's range, or a missing or malformed data file.
    public init(from: String, to: String, sharedData: URL? = nil) throws {
        let shared = sharedData ?? Self.sharedDataDirectory()
        guard let first = CivilDay.number(from), let last = CivilDay.number(to) else {
            throw FixtureError("days must be YYYY-MM-DD: '\(from)', '\(to)'")
        }
        guard first <= last else { throw FixtureError("'\(to)' is before '\(from)'") }

        let national = try NationalFile.cached(sharedData: shared)
        guard first >= national.firstDay, last <= national.firstDay + national.days.count - 1 else {
            throw FixtureError("\(from)...\(to) is outside the national file's \(national.range.first)...\(national.range.last)")
        }

        let schemaIDs = try Self.schemaDistrictIDs(sharedData: shared)
        let ids = (Set(schemaIDs).union(Self.pseudoIDs)).sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        var idIndex: [String: Int] = [:]
        for (index, id) in ids.enumerated() { idIndex[id] = index }

        let bavarianPopulation = try Self.bavarianPopulationCache.get()
        let hashes = ids.map { Self.fnv1a(Array($0.utf8)) }
        let populations = ids.indices.map { index -> Int in
            let id = ids[index]
            if Self.pseudoIDs.contains(id) { return 0 }
            if let population = bavarianPopulation[id] { return population }
            return 50_000 + Int(Self.mix(hashes[index] ^ 0x5EED) % 550_001)
        }

        let dayCount = last - first + 1
        let width = ids.count
        var tenths = [Int](repeating: 0, count: dayCount * width)
        for day in 0..<dayCount {
            let nationalIncidence = national.days[first + day - national.firstDay].incidence
            for index in 0..<width where populations[index] > 0 {
                let factor = 0.5 + Double(Self.mix(hashes[index]) % 1_000_001) / 1_000_000
                tenths[day * width + index] = Self.tenths(of: nationalIncidence * factor)
            }
        }
        for row in try Self.bavarianHistoryCache.get() {
            guard row.day >= first, row.day <= last, let index = idIndex[row.id] else { continue }
            tenths[(row.day - first) * width + index] = Self.tenths(of: row.incidence)
        }

        // Faelle_gesamt starts from the national total before the first day, shared by population.
        let totalBefore = first > national.firstDay ? national.days[first - 1 - national.firstDay].total : 0
        let nationalPopulation = max(1, national.population)
        let baseCases = ids.indices.map { index -> Int in
            if populations[index] == 0 { return Int(Self.mix(hashes[index] ^ 0xCA5E) % 500) }
            return Int((Double(totalBefore) * Double(populations[index]) / Double(nationalPopulation)).rounded())
        }

        self.firstDay = first
        self.days = (first...last).map(CivilDay.string)
        self.dayBytes = days.map { Array($0.utf8) }
        self.districtIDs = ids
        self.idBytes = ids.map { Array($0.utf8) }
        self.idHashes = hashes
        self.idIndex = idIndex
        self.populations = populations
        self.populationBytes = populations.map { Array(String($0).utf8) }
        self.baseCases = baseCases
        self.tenths = tenths
        self.copies = [UInt8](repeating: 1, count: dayCount * width)
    }

    // MARK: - Reading and changing values

    /// The incidence written for `(day, id)`, exactly as a parser reads it back from the file;
    /// `nil` for an unknown day or id, or a removed row.
    public func incidence(day: String, id: String) -> Double? {
        guard let cell = cell(day: day, id: id), copies[cell] > 0 else { return nil }
        return Self.value(tenths: tenths[cell])
    }

    /// The `Bevoelkerung` written for `id` (0 for the pseudo-ids); `nil` for an unknown id.
    public func population(id: String) -> Int? {
        idIndex[id].map { populations[$0] }
    }

    /// How many data rows the file has (without the header), removals and duplicates counted.
    public var rowCount: Int {
        copies.reduce(0) { $0 + Int($1) }
    }

    /// Writes `incidence` for `(day, id)` from now on, rounded to what the file can hold
    /// (``format(_:)``); a removed row comes back. `Faelle_7-Tage` follows the new value.
    ///
    /// - Precondition: `day` is one of ``days``, `id` one of ``districtIDs``, the value finite.
    public mutating func set(day: String, id: String, incidence: Double) {
        let cell = requireCell(day: day, id: id)
        precondition(incidence.isFinite, "an incidence must be finite, not \(incidence)")
        tenths[cell] = Self.tenths(of: incidence)
        copies[cell] = max(copies[cell], 1)
    }

    /// Leaves the row of `(day, id)` out of the file (a district missing on that day).
    public mutating func remove(day: String, id: String) {
        copies[requireCell(day: day, id: id)] = 0
    }

    /// Writes the row of `(day, id)` once more, right after itself (a duplicated row).
    public mutating func duplicate(day: String, id: String) {
        let cell = requireCell(day: day, id: id)
        copies[cell] = copies[cell] &+ 1
    }

    private func cell(day: String, id: String) -> Int? {
        guard let number = CivilDay.number(day), let index = idIndex[id] else { return nil }
        let offset = number - firstDay
        guard offset >= 0, offset < days.count else { return nil }
        return offset * districtIDs.count + index
    }

    private func requireCell(day: String, id: String) -> Int {
        guard let cell = cell(day: day, id: id) else {
            preconditionFailure("no row for day '\(day)' and id '\(id)' in \(days.first ?? "")...\(days.last ?? "")")
        }
        return cell
    }

    // MARK: - Writing

    /// The whole file: header and rows, LF line ends.
    public func render(order: Order = .byDay) -> Data {
        var out = Data()
        out.reserveCapacity((rowCount + 1) * 48)
        emit(order: order) { out.append($0) }
        return out
    }

    /// Writes the file to `url` in chunks of about 1 MiB (the full range is some 45 MB).
    public func write(to url: URL, order: Order = .byDay) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw FixtureError("cannot create \(url.path)")
        }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        try emit(order: order) { chunk in
            guard let base = chunk.baseAddress else { return }
            try handle.write(contentsOf: Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: chunk.count, deallocator: .none))
        }
    }

    /// Calls `sink` with successive pieces of the file (valid only during the call);
    /// `Faelle_gesamt` accumulates over days the same way in either order, so a row's bytes do
    /// not depend on the order.
    private func emit(order: Order, chunk: Int = 1 << 20, _ sink: (UnsafeBufferPointer<UInt8>) throws -> Void) rethrows {
        // Room for a full chunk plus one cell written 255 times.
        let out = ByteRows(capacity: chunk + 255 * ByteRows.maxRow)
        out.append(Array(Self.header.utf8))
        out.append(10)
        let width = districtIDs.count
        switch order {
        case .byDay:
            var running = baseCases
            for day in days.indices {
                for index in 0..<width {
                    let cell = day * width + index
                    let cases7 = cases7(cell: cell, index: index)
                    let new = newCases(day: day, index: index, cases7: cases7)
                    running[index] += new
                    for _ in 0..<copies[cell] {
                        appendRow(out, day: day, index: index, total: running[index], new: new, cases7: cases7, tenths: tenths[cell])
                    }
                    if out.count >= chunk { try out.drain(into: sink) }
                }
            }
        case .byDistrict:
            for index in 0..<width {
                var running = baseCases[index]
                for day in days.indices {
                    let cell = day * width + index
                    let cases7 = cases7(cell: cell, index: index)
                    let new = newCases(day: day, index: index, cases7: cases7)
                    running += new
                    for _ in 0..<copies[cell] {
                        appendRow(out, day: day, index: index, total: running, new: new, cases7: cases7, tenths: tenths[cell])
                    }
                    if out.count >= chunk { try out.drain(into: sink) }
                }
            }
        }
        if out.count > 0 { try out.drain(into: sink) }
    }

    private func appendRow(_ out: ByteRows, day: Int, index: Int, total: Int, new: Int, cases7: Int, tenths: Int) {
        out.reserveRow()
        out.append(dayBytes[day])
        out.append(44)
        out.append(idBytes[index])
        out.append(44)
        out.append(populationBytes[index])
        out.append(44)
        out.appendInteger(total)
        out.append(44)
        out.appendInteger(new)
        out.append(44)
        out.appendInteger(cases7)
        out.append(44)
        out.appendTenths(tenths)
        out.append(10)
    }

    /// `Faelle_7-Tage`: the written incidence times the population; a few cases for the pseudo-ids.
    private func cases7(cell: Int, index: Int) -> Int {
        let population = populations[index]
        guard population > 0 else { return Int(Self.mix(idHashes[index] &+ UInt64(bitPattern: Int64(cell))) % 4) }
        return Int((Double(tenths[cell]) / 10 * Double(population) / 100_000).rounded())
    }

    /// `Faelle_neu`: about a seventh of the week's cases, varying by day; never negative.
    private func newCases(day: Int, index: Int, cases7: Int) -> Int {
        guard cases7 > 0 else { return 0 }
        let noise = Self.mix(idHashes[index] ^ UInt64(firstDay + day) &* 0x9E37_79B9)
        let weight = 0.6 + Double(noise % 801) / 1000
        return max(0, Int((Double(cases7) / 7 * weight).rounded()))
    }

    // MARK: - Number format

    /// `value` formatted as the file writes an incidence: rounded to one decimal (halves away
    /// from zero), no trailing `.0` (`0`, `0.1`, `103`, `111.1`). Tests compare against
    /// `Double(format(x))`, which is what ``incidence(day:id:)`` returns after ``set(day:id:incidence:)``.
    public static func format(_ value: Double) -> String {
        let out = ByteRows(capacity: ByteRows.maxRow)
        out.appendTenths(tenths(of: value))
        return out.withBytes { String(decoding: $0, as: UTF8.self) }
    }

    static func tenths(of value: Double) -> Int {
        precondition(value.isFinite && abs(value) < 1e15, "an incidence must be finite and sane, not \(value)")
        return Int((value * 10).rounded(.toNearestOrAwayFromZero))
    }

    /// Equals `Double(format(x))`: both are the double nearest to tenths / 10.
    static func value(tenths: Int) -> Double {
        Double(tenths) / 10
    }

    // MARK: - Data files

    /// The shared data directory: `AMPEL_SHARED_DATA` if set, else `<repo>/../shared/data`.
    public static func sharedDataDirectory() -> URL {
        if let path = ProcessInfo.processInfo.environment["AMPEL_SHARED_DATA"], !path.isEmpty {
            return URL(fileURLWithPath: path, isDirectory: true)
        }
        return repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/data", isDirectory: true)
    }

    /// The first and last day of the national file (`YYYY-MM-DD`): the range a file can cover.
    public static func nationalDays(sharedData: URL? = nil) throws -> (first: String, last: String) {
        try NationalFile.cached(sharedData: sharedData ?? sharedDataDirectory()).range
    }

    /// The repository: this file is `<repo>/Tests/AmpelTestSupport/RKIDistrictFile.swift`.
    static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func bundledRKIFile(_ name: String) -> URL {
        repositoryRoot.appendingPathComponent("Sources/AmpelData/Resources/rki/\(name)")
    }

    /// The `Landkreis_id` enum of the RKI's table schema.
    static func schemaDistrictIDs(sharedData: URL) throws -> [String] {
        let url = sharedData.appendingPathComponent("rki-github/tableschema_COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.json")
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url))
        guard let fields = (object as? [String: Any])?["fields"] as? [[String: Any]],
              let field = fields.first(where: { $0["name"] as? String == "Landkreis_id" }),
              let ids = (field["constraints"] as? [String: Any])?["enum"] as? [String], !ids.isEmpty else {
            throw FixtureError("\(url.path) has no Landkreis_id enum")
        }
        return ids
    }

    /// Read once per process: tests and benchmarks build many files from the same sources.
    static let bavarianPopulationCache = Result { try readBavarianPopulation() }
    static let bavarianHistoryCache = Result { try readBavarianHistory() }

    static func readBavarianPopulation() throws -> [String: Int] {
        let table = try CSVTable(url: bundledRKIFile("bavaria_population.csv"))
        let ags = try table.column("ags"), population = try table.column("ewz_rki_2019")
        var result: [String: Int] = [:]
        for row in table.rows {
            guard let value = Int(row[population]) else { throw FixtureError("bad ewz_rki_2019 for \(row[ags])") }
            result[String(row[ags])] = value
        }
        return result
    }

    static func readBavarianHistory() throws -> [(day: Int, id: String, incidence: Double)] {
        let name = "rki_fixed_7day_incidence_bavaria_\(bavarianHistory.first)_\(bavarianHistory.last).csv"
        let table = try CSVTable(url: bundledRKIFile(name))
        let date = try table.column("date"), ags = try table.column("ags"), incidence = try table.column("incidence_7d")
        return try table.rows.map { row in
            guard let day = CivilDay.number(row[date]), let value = Double(row[incidence]) else {
                throw FixtureError("a bad row in \(name): \(row.joined(separator: ","))")
            }
            return (day, String(row[ags]), value)
        }
    }

    // MARK: - Deterministic numbers

    static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    /// splitmix64's finaliser: spreads similar ids (`09161`, `09162`) over the whole range.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
