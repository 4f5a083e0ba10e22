import AmpelDomain
import Foundation
import Synchronization

/// The real RKI data that ships with Ampel, so it answers with no network at all.
///
/// - Three full `RKI_Landkreisdaten` snapshots (2020-10-15, 2020-11-05, 2020-11-23; all 412
///   districts of Germany).
/// - The RKI's "fixed" daily 7-day incidence of the 96 Bavarian districts from 2020-11-18 to
///   2021-11-22, with the state values.
///
/// Source: Robert Koch-Institut (RKI), dl-de/by-2-0 (Daten verändert); see `ATTRIBUTION.md`.
public final class BundledData: Sendable {
    /// The days of the bundled snapshots, oldest first.
    public static let snapshotDays: [Day] = ["2020-10-15", "2020-11-05", "2020-11-23"].compactMap(Day.init(iso:))

    /// The shared instance; files are read on first use.
    public static let shared = BundledData()

    private let snapshots: [Dataset]
    private let historyStore: HistoryStore
    private let courseCache = Mutex<[String: (ruleSet: RuleSet, courses: [Day: [String: DistrictCourse]])]>([:])

    private init() {
        let decoder = ArcGISDecoder()
        snapshots = Self.snapshotDays.map { day in
            do {
                let data = try Self.resource("landkreisdaten_\(day.iso)", "json")
                return try decoder.dataset(data, source: "snapshot:\(day.iso)")
            } catch {
                // Bundled files are checked by the tests; a broken one is a build defect.
                fatalError("bundled snapshot \(day.iso) is unreadable: \(error)")
            }
        }
        historyStore = HistoryStore()
    }

    static func resource(_ name: String, _ ext: String) throws -> Data {
        guard let url = Bundle.module.url(forResource: name, withExtension: ext, subdirectory: "rki") else {
            throw DataError(.io, "bundled file rki/\(name).\(ext) is missing")
        }
        return try Data(contentsOf: url)
    }

    /// The bundled snapshot published on or before `day` (the latest one without a day).
    public func snapshot(on day: Day? = nil) throws(DataError) -> Dataset {
        try Self.latest(in: snapshots, onOrBefore: day, what: "bundled snapshot")
    }

    /// The bundled daily history itself (parsed on first use).
    public var dailyHistory: DailyHistory { historyStore.history }

    /// The days of the bundled daily history, oldest first.
    public var historyDays: [Day] { historyStore.history.days }

    /// The daily history value published on or before `day` (the latest one without a day).
    public func history(on day: Day? = nil) throws(DataError) -> Dataset {
        let history = historyStore.history
        let target = day ?? history.days[history.days.count - 1]
        guard let chosen = history.days.last(where: { $0 <= target }) else {
            throw DataError(.notAvailable, "no bundled daily history on or before \(target); it covers \(history.days[0]) to \(history.days[history.days.count - 1])")
        }
        return history.dataset(on: chosen)
    }

    /// Up to `count` days of the daily history before `day`, oldest first.
    public func historyWindow(before day: Day, count: Int) -> [Dataset] {
        guard count > 0 else { return [] }
        let history = historyStore.history
        return history.days.filter { $0 < day }.suffix(count).map { history.dataset(on: $0) }
    }

    /// The daily history publication on or before `day` with the courses `ruleSet` gives,
    /// walked from the first bundled day (what `--source history` and `ampel replay` answer).
    public func history(on day: Day?, ruleSet: RuleSet, region: Region = .bavaria) throws(DataError) -> Dataset {
        var current = try history(on: day)
        current.courses = courses(ruleSet, region: region)[current.date] ?? [:]
        return current
    }

    /// The courses of every bundled day under `ruleSet`, computed once per rule set.
    func courses(_ ruleSet: RuleSet, region: Region) -> [Day: [String: DistrictCourse]] {
        let key = ruleSet.id + "|" + region.prefixes.joined(separator: ",")
        if let known = courseCache.withLock({ $0[key].flatMap { $0.ruleSet == ruleSet ? $0.courses : nil } }) { return known }
        let history = historyStore.history
        let computed = ruleSet.courseHistory(over: history.days.map { history.dataset(on: $0) }, region: region)
        courseCache.withLock { $0[key] = (ruleSet, computed) }
        return computed
    }

    /// The latest bundled publication (snapshot or daily history) on or before `day`.
    ///
    /// On a day with both, the snapshot wins: it covers all of Germany.
    public func dataset(on day: Day? = nil) throws(DataError) -> Dataset {
        let snapshot = try? self.snapshot(on: day)
        let daily = try? history(on: day)
        switch (snapshot, daily) {
        case let (s?, h?): return h.date > s.date ? h : s
        case let (s?, nil): return s
        case let (nil, h?): return h
        case (nil, nil):
            throw DataError(.notAvailable, "no bundled data on or before \(day.map(\.iso) ?? "today"); the first bundled publication is \(Self.snapshotDays[0])")
        }
    }

    static func latest(in list: [Dataset], onOrBefore day: Day?, what: String) throws(DataError) -> Dataset {
        guard let day else { return list[list.count - 1] }
        guard let found = list.last(where: { $0.date <= day }) else {
            throw DataError(.notAvailable, "no \(what) on or before \(day); the first is \(list[0].date)")
        }
        return found
    }
}

/// Parses the bundled history once, on first use (it is the largest bundled file).
private final class HistoryStore: Sendable {
    private let lazyHistory = LazyHistory()
    var history: DailyHistory { lazyHistory.value }
}

private final class LazyHistory: @unchecked Sendable {
    // Guarded by `lock`; written once.
    private var cached: DailyHistory?
    private let lock = NSLock()

    var value: DailyHistory {
        lock.lock()
        defer { lock.unlock() }
        if let cached { return cached }
        do {
            let history = try DailyHistory.parse(
                daily: BundledData.resource("rki_fixed_7day_incidence_bavaria_2020-11-18_2021-11-22", "csv"),
                states: BundledData.resource("rki_fixed_7day_incidence_states_2020-05-06_2021-11-22", "csv"),
                population: BundledData.resource("bavaria_population", "csv"))
            cached = history
            return history
        } catch {
            fatalError("bundled history is unreadable: \(error)")
        }
    }
}
