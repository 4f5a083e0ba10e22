import AmpelDomain
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The last good dataset on disk, so that a restart without network still has data.
///
/// One file, `incidence.json`, in a state directory, written with ``AtomicFile``: a crash
/// leaves either the old or the new file, never half of one. Only validated datasets are ever written. A file that cannot be
/// read back (truncated, edited, another format) is reported as a ``DataError``; the store
/// moves it aside (``moveAside(now:)``) and falls back to the next source.
///
/// The format (version 1) is JSON with sorted keys:
/// `{"format": "ampel-incidence-cache", "version": 1, "savedAt": "<ISO 8601>",
///   "date": "YYYY-MM-DD", "source": "rki", "districts": [{"ags", "name", "shortName",
///   "kind", "state", "population", "incidence", "stateIncidence"}, ...]}`; a publication of
///   state indicators adds each district's `"indicators": [{"date", "level", "name", "region",
///   "value"}]` (its `incidence` `null`) and a top-level `"states": {"00": [...], "09": [...]}`.
public struct DatasetCache: Sendable {
    /// The state directory.
    public let directory: URL

    /// The cache file's name inside ``directory``.
    public static let fileName = "incidence.json"

    /// What the `format` field says.
    static let format = "ampel-incidence-cache"
    static let version = 1

    public init(directory: URL) {
        self.directory = directory
    }

    /// The cache file.
    public var fileURL: URL { directory.appendingPathComponent(Self.fileName) }

    /// The default state directory of every command (``StateDirectory/resolve(environment:)``).
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        StateDirectory.resolve(environment: environment)
    }

    /// A dataset read back from the cache, with the time it was written.
    public struct Entry: Sendable, Hashable {
        public let dataset: Dataset
        public let savedAt: Date
        /// What identified the file the dataset came from, for the first conditional request after a restart.
        public let validators: HTTPValidators?
    }

    // MARK: - File format

    struct File: Decodable, VersionedJSONFile {
        struct Row: Decodable {
            var ags: String
            var name: String
            var shortName: String
            var kind: District.Kind
            var state: String
            var population: Int?
            var incidence: Double?
            var stateIncidence: Double?
            /// The state indicators of a publication of them (absent in an incidence cache).
            var indicators: [IndicatorRow]?
        }

        struct IndicatorRow: Decodable {
            var name: IndicatorName
            var level: IndicatorLevel
            var region: String
            var value: Double?
            var date: Day?

            var indicatorValue: IndicatorValue { IndicatorValue(key: IndicatorKey(name, level), region: region, value: value, date: date) }
        }

        var format: String
        var version: Int
        var savedAt: Date
        var date: Day
        var source: String
        var districts: [Row]
        /// The state indicators by state id, Germany's (`00`) included (absent in an incidence cache).
        var states: [String: [IndicatorRow]]?
        /// `ETag` and `Last-Modified` of the file read (source `rki`); absent in older caches.
        var etag: String?
        var lastModified: String?
    }

    // MARK: - Reading

    /// Reads the cache.
    ///
    /// - Returns: `nil` when there is no cache file yet.
    /// - Throws: ``DataError`` (`io`, `malformed`, `invalidValue`, `duplicateDistrict`,
    ///   `empty`) when the file exists but is unreadable or does not hold a valid dataset.
    public func load() throws(DataError) -> Entry? {
        let path = fileURL.path
        guard let file = try File.read(at: fileURL, what: "cache", format: Self.format, version: Self.version) else { return nil }
        let validators = file.etag == nil && file.lastModified == nil ? nil : HTTPValidators(etag: file.etag, lastModified: file.lastModified)
        return Entry(dataset: try Self.dataset(of: file, in: "the cache file '\(path)'"), savedAt: file.savedAt, validators: validators)
    }

    /// The validated dataset a cache file (or an entry of the history file) holds.
    static func dataset(of file: File, in what: String) throws(DataError) -> Dataset {
        var districts: [String: DistrictIncidence] = [:]
        for row in file.districts {
            guard District.isValidCode(row.ags) else {
                throw DataError(.invalidValue, "\(what): district code '\(row.ags)' is not five digits")
            }
            func valid(_ value: Double?) -> Bool { value.map { $0.isFinite && $0 >= 0 } ?? true }
            guard valid(row.incidence), valid(row.stateIncidence) else {
                throw DataError(.invalidValue, "\(what): district \(row.ags) has an invalid incidence")
            }
            let indicators = row.indicators ?? []
            guard row.incidence != nil || !indicators.isEmpty else {
                throw DataError(.missingField, "\(what): district \(row.ags) has neither an incidence nor indicators")
            }
            guard indicators.allSatisfy({ valid($0.value) }) else {
                throw DataError(.invalidValue, "\(what): district \(row.ags) has an invalid indicator value")
            }
            guard districts[row.ags] == nil else {
                throw DataError(.duplicateDistrict, "\(what): district \(row.ags) appears twice")
            }
            let district = District(ags: row.ags, name: row.name, shortName: row.shortName, kind: row.kind,
                                    state: row.state, population: row.population)
            districts[row.ags] = DistrictIncidence(
                district: district, incidence: row.incidence, stateIncidence: row.stateIncidence,
                indicators: indicators.map(\.indicatorValue))
        }
        guard !districts.isEmpty else {
            throw DataError(.empty, "\(what) holds no districts")
        }
        var states: [String: [IndicatorValue]] = [:]
        for (state, rows) in file.states ?? [:] {
            guard GermanState.name(ofState: state) != nil, rows.allSatisfy({ $0.value.map { $0.isFinite && $0 >= 0 } ?? true }) else {
                throw DataError(.invalidValue, "\(what): state '\(state)' is unknown or has an invalid indicator value")
            }
            states[state] = rows.map(\.indicatorValue)
        }
        return Dataset(date: file.date, source: file.source, districts: districts, states: states)
    }

    /// Moves an unreadable cache file aside, to `incidence.json.corrupt-<UTC time>` in the
    /// same directory (content untouched), so that the next start does not trip over it again
    /// and whoever looks finds it.
    ///
    /// - Returns: the path it was moved to.
    /// - Throws: ``DataError`` `io` when the rename fails.
    public func moveAside(now: Date = Date()) throws(DataError) -> String {
        try Self.moveAside(fileURL.path, now: now)
    }

    /// Moves the file at `path` aside to `<path>.corrupt-<UTC time>`; see ``moveAside(now:)``.
    static func moveAside(_ path: String, now: Date) throws(DataError) -> String {
        let stamp = Self.timestamp(now)
        var target = path + ".corrupt-" + stamp
        var attempt = 1
        while FileManager.default.fileExists(atPath: target) {
            attempt += 1
            target = path + ".corrupt-" + stamp + "-\(attempt)"
        }
        guard rename(path, target) == 0 else {
            throw DataError(.io, "cannot move the file '\(path)' aside to '\(target)': \(String(cString: strerror(errno)))")
        }
        return target
    }

    /// `20261124T113000Z`: the moment in UTC, as the names of files moved aside carry it.
    public static func timestamp(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }

    // MARK: - Writing

    /// Writes `dataset` atomically, creating the directory if needed.
    ///
    /// - Throws: ``DataError`` `io` when the directory or file cannot be written; the old
    ///   cache file is then unchanged.
    public func save(_ dataset: Dataset, savedAt: Date = Date(), validators: HTTPValidators? = nil) throws(DataError) {
        var json = JSONWriter(capacity: 160 * dataset.districts.count + 256)
        Self.write(dataset, savedAt: savedAt, validators: validators, to: &json)
        try Self.writeAtomically(json.bytes, to: fileURL, in: directory)
    }

    /// `dataset` in the cache file's form, keys sorted: written by hand, since `JSONEncoder`
    /// built a tree of every value first (the history of 28 days of 400 districts: most of the
    /// time and of the peak memory of taking in a new publication).
    static func write(_ dataset: Dataset, savedAt: Date, validators: HTTPValidators?, to json: inout JSONWriter) {
        json.raw(#"{"date":"#)
        json.string(dataset.date.iso)
        json.raw(#","districts":["#)
        for (index, entry) in dataset.districts.values.sorted(by: { $0.district.ags < $1.district.ags }).enumerated() {
            let district = entry.district
            json.raw(index == 0 ? #"{"ags":"# : #",{"ags":"#)
            json.string(district.ags)
            json.raw(#","incidence":"#)
            json.number(entry.incidence)
            if !entry.indicators.isEmpty {
                json.raw(#","indicators":"#)
                writeIndicators(entry.indicators, to: &json)
            }
            json.raw(#","kind":"#)
            json.string(district.kind.rawValue)
            json.raw(#","name":"#)
            json.string(district.name)
            json.raw(#","population":"#)
            json.optional(district.population) { $0.number($1) }
            json.raw(#","shortName":"#)
            json.string(district.shortName)
            json.raw(#","state":"#)
            json.string(district.state)
            json.raw(#","stateIncidence":"#)
            json.number(entry.stateIncidence)
            json.raw("}")
        }
        json.raw("]")
        if let etag = validators?.etag {
            json.raw(#","etag":"#)
            json.string(etag)
        }
        json.raw(#","format":"#)
        json.string(format)
        if let modified = validators?.lastModified {
            json.raw(#","lastModified":"#)
            json.string(modified)
        }
        json.raw(#","savedAt":"#)
        json.string(iso8601(savedAt))
        json.raw(#","source":"#)
        json.string(dataset.source)
        if !dataset.states.isEmpty {
            json.raw(#","states":{"#)
            for (index, state) in dataset.states.keys.sorted().enumerated() {
                if index > 0 { json.raw(",") }
                json.string(state)
                json.raw(":")
                writeIndicators(dataset.states[state] ?? [], to: &json)
            }
            json.raw("}")
        }
        json.raw(#","version":"#)
        json.number(version)
        json.raw("}")
    }

    /// `[{"date","level","name","region","value"}]`.
    static func writeIndicators(_ values: [IndicatorValue], to json: inout JSONWriter) {
        json.raw("[")
        for (number, indicator) in values.enumerated() {
            if number > 0 { json.raw(",") }
            indicator.write(to: &json)
        }
        json.raw("]")
    }

    /// `2026-11-24T11:30:00Z`, as `JSONDecoder`'s `.iso8601` reads it back.
    static func iso8601(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// Writes `data` to ``fileURL`` with ``AtomicFile`` (mode `0o644`: the data is public),
    /// creating the directory first.
    func writeAtomically(_ data: some ContiguousBytes) throws(DataError) {
        try Self.writeAtomically(data, to: fileURL, in: directory)
    }

    /// Writes `data` to `fileURL` with ``AtomicFile`` (mode `0o644`), creating `directory` first.
    static func writeAtomically(_ data: some ContiguousBytes, to fileURL: URL, in directory: URL) throws(DataError) {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw DataError(.io, "cannot create the state directory '\(directory.path)': \(error.localizedDescription)")
        }
        do {
            try AtomicFile(path: fileURL.path, mode: 0o644).write { output in data.withUnsafeBytes { output.append($0) } }
        } catch {
            throw DataError(.io, "\(error)")
        }
    }
}
