import AmpelDomain
import Foundation

/// The state indicators Ampel reads, one series each: the 7-day hospital admissions and
/// hospitalisation incidence (the RKI's hospitalisation file) and the COVID-19 patients in
/// intensive care (the DIVI register's state file), for the 16 states and Germany (`00`).
///
/// A publication day's value of an indicator is its newest value on or before that day, at
/// most ``maxAgeDays`` older: the two files are published on the same day but the
/// hospitalisation file's newest row is a day behind the register's, and a lamp should not
/// lose its hospital indicator for that. Older than that, the value is missing (`null`).
public struct StateIndicators: Sendable, Hashable {
    /// How many days older than the publication day a value may be.
    public static let maxAgeDays = 3

    public let series: [IndicatorKey: IndicatorSeries]

    /// Where the daemon and the CLI keep the last good publication of state indicators (its
    /// cache and history files), apart from the incidence data's.
    public static func cacheDirectory(in stateDirectory: URL) -> URL {
        stateDirectory.appendingPathComponent("indicators", isDirectory: true)
    }

    public init(_ series: [IndicatorSeries]) {
        self.series = Dictionary(series.map { ($0.key, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// The indicators the hospitalisation and intensive-care files deliver.
    public static let provided: Set<IndicatorKey> = [
        IndicatorKey(.hospitalisationCases7d, .state), IndicatorKey(.hospitalisationIncidence7d, .state), IndicatorKey(.icuCovidPatients, .state),
    ]

    /// Refuses a rule set that reads an indicator no source delivers: every district would
    /// fail without it.
    public static func checkProvided(_ ruleSet: RuleSet) throws(DataError) {
        let missing = ruleSet.indicators.map(\.key).filter { $0 != .districtIncidence && !provided.contains($0) }
        guard missing.isEmpty else {
            let known = provided.map(\.name.rawValue).sorted().joined(separator: ", ")
            throw DataError(.notAvailable, "rule set '\(ruleSet.id)' reads \(missing.map { "\($0.name) (\($0.level.rawValue))" }.joined(separator: ", ")), which no source delivers (state indicators: \(known))")
        }
    }

    /// The indicators held, by name.
    public var keys: [IndicatorKey] { series.keys.sorted() }

    /// The newest day of any series: the publication day of the data.
    public var newestDay: Day? { series.values.map(\.lastDay).max() }

    /// The oldest day of any series.
    public var oldestDay: Day? { series.values.map(\.firstDay).min() }

    /// Each indicator's value for `state` (`09`, `00` for Germany) on `day`.
    public func values(state: String, on day: Day) -> [IndicatorValue] {
        keys.map { key in
            let found = series[key]?.latest(region: state, onOrBefore: day, maxAge: Self.maxAgeDays)
            return IndicatorValue(key: key, region: state, value: found?.value, date: found?.day)
        }
    }

    /// The publication of `day` (the newest without one): every district of `region`, each
    /// with its state's values.
    ///
    /// - Throws: ``DataError`` `notAvailable` for a day before the data begins.
    public func dataset(on day: Day? = nil, region: Region, source: String) throws(DataError) -> Dataset {
        guard let newest = newestDay, let oldest = oldestDay else {
            throw DataError(.empty, "no hospital or intensive-care data")
        }
        let date = min(day ?? newest, newest)
        guard date >= oldest else {
            throw DataError(.notAvailable, "no hospital or intensive-care data on or before \(date.iso): the data begins on \(oldest.iso)")
        }
        var byState: [String: [IndicatorValue]] = [:]
        for state in GermanState.ids { byState[state] = values(state: state, on: date) }
        var districts: [String: DistrictIncidence] = [:]
        for district in DistrictDirectory.germany.districts(in: region) {
            districts[district.ags] = DistrictIncidence(district: district, incidence: nil, stateIncidence: nil,
                                                        indicators: byState[String(district.stateCode)] ?? [])
        }
        return Dataset(date: date, source: source, districts: districts, states: byState)
    }

    /// Up to `count` daily publications before `day`, oldest first, within the data.
    public func datasets(before day: Day, count: Int, region: Region, source: String) -> [Dataset] {
        guard let oldest = oldestDay, count > 0 else { return [] }
        let first = max(day.daysSinceEpoch - count, oldest.daysSinceEpoch)
        return (first..<day.daysSinceEpoch).compactMap { number in
            try? dataset(on: Day(daysSinceEpoch: number), region: region, source: source)
        }
    }

    /// Each series with the values `kept` already held kept as they were (a value once
    /// published is never changed), and how many of those the new files had changed.
    public func keepingPublished(_ kept: StateIndicators?) -> (indicators: StateIndicators, changedValues: Int) {
        var changed = 0
        let merged = series.values.map { own in
            let result = own.keepingPublished(kept?.series[own.key])
            changed += result.changedValues
            return result.series
        }
        return (StateIndicators(merged), changed)
    }

    /// The files as bundled: the RKI's own files with the columns Ampel reads, as of 2026-08-22
    /// (`Resources/indicators/ATTRIBUTION.md`).
    public static func bundled() throws(DataError) -> StateIndicators {
        try bundledResult.get()
    }

    private static let bundledResult: Result<StateIndicators, DataError> = {
        func read(_ name: String) throws(DataError) -> Data {
            guard let url = Bundle.module.url(forResource: name, withExtension: "csv", subdirectory: "indicators"),
                  let data = try? Data(contentsOf: url) else {
                throw DataError(.notAvailable, "the bundled file indicators/\(name).csv is missing")
            }
            return data
        }
        do throws(DataError) {
            let hospital = try HospitalisationCSV.parse(read("hospitalisierungen"), file: "hospitalisierungen.csv")
            let icu = try IntensiveCareCSV.parse(read("intensivregister"), file: "intensivregister.csv")
            return .success(StateIndicators(hospital.series + icu.series))
        } catch {
            return .failure(error)
        }
    }()
}

/// The bundled hospital and intensive-care data at a chosen day (`--source bundled` with a
/// rule set of state indicators): fixed, never stale.
public struct BundledIndicatorSource: IncidenceSource {
    let day: Day?
    let region: Region
    /// How many publications up to the day walk the trend and day counts: as many as a live
    /// daemon keeps (`data.history`), not every day since 2020 (2,350 publications of 400
    /// districts took 600 MB at start).
    let window: Int

    public init(day: Day? = nil, region: Region, window: Int = PublicationHistory.defaultLength) {
        self.day = day
        self.region = region
        self.window = max(1, window)
    }

    public var name: String { "bundled:\(day?.iso ?? "latest")" }
    public var isLive: Bool { false }

    public func fetch() async throws(DataError) -> Dataset {
        try load()
    }

    /// The same as ``fetch()``, for callers outside an async context (the CLI).
    public func load() throws(DataError) -> Dataset {
        try StateIndicators.bundled().dataset(on: day, region: region, source: "bundled")
    }

    /// The publication with each district's trend and phase in force under `ruleSet`, walked
    /// over the ``window`` of days up to it: what `check`, `districts` and `replay` answer.
    public func publication(ruleSet: RuleSet, source: String = "bundled") throws(DataError) -> Dataset {
        let indicators = try StateIndicators.bundled()
        let day = try indicators.dataset(on: self.day, region: region, source: source)
        let earlier = indicators.datasets(before: day.date, count: window - 1, region: region, source: source)
        return day.withCourses(window: earlier + [day], ruleSet: ruleSet, region: region)
    }

    public func earlier(than day: Day, count: Int) -> [Dataset] {
        (try? StateIndicators.bundled().datasets(before: day, count: min(count, window - 1), region: region, source: "bundled")) ?? []
    }
}
