import AmpelData
import AmpelDomain
import Foundation
import Logging
import Synchronization
import Testing

/// The last publications kept next to the cache, and what the store computes from them.
@Suite struct PublicationHistoryTests {
    /// A live source that answers the bundled history's day `day` as the RKI would.
    final class DaySource: IncidenceSource {
        let current = Mutex(day("2021-03-01"))
        var name: String { "rki" }
        var isLive: Bool { true }
        func fetch() async throws(DataError) -> Dataset {
            let dataset = try BundledData.shared.history(on: current.withLock { $0 })
            return Dataset(date: dataset.date, source: "rki", districts: dataset.districts)
        }
    }

    static let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    func store(_ source: DaySource, _ directory: URL, length: Int = 28) throws -> IncidenceStore {
        IncidenceStore(source: source, cache: DatasetCache(directory: directory), ruleSet: try RuleSetCatalog.bundled("notbremse-2021"),
                       fallback: nil, now: { isoDate("2021-04-01T10:00:00Z") }, logger: Self.quiet,
                       history: PublicationHistory(directory: directory, length: length))
    }

    @Test func addingKeepsOnePublicationPerDayOldestFirstAndAtMostTheLength() throws {
        var window: [Dataset] = []
        for iso in ["2021-01-03", "2021-01-01", "2021-01-02", "2021-01-02", "2021-01-04", "2021-01-05"] {
            window = PublicationHistory.adding(try BundledData.shared.history(on: day(iso)), to: window, length: 4)
        }
        #expect(window.map(\.date.iso) == ["2021-01-02", "2021-01-03", "2021-01-04", "2021-01-05"])
    }

    @Test func theStoreKeepsTheLastPublicationsAndARestartComputesTheSameCourses() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = DaySource()
        let first = try store(source, directory)
        #expect(await first.start() == .none)
        var day = Day(iso: "2021-03-01")!
        for _ in 0..<30 {
            source.current.withLock { $0 = day }
            _ = await first.refresh()
            _ = await first.refresh()  // the same publication again: unchanged, not kept twice
            day = day.adding(days: 1)
        }
        let kept = try PublicationHistory(directory: directory).load()
        #expect(kept.count == 28)
        #expect(kept.first?.date == Day(iso: "2021-03-03"))
        #expect(kept.last?.date == Day(iso: "2021-03-30"))
        #expect(Set(kept.map(\.date)).count == 28)
        let before = try #require(await first.dataset)
        #expect(before.courses.count == 96)
        #expect(before.courses.values.allSatisfy { $0.trend != nil && $0.inForce != nil })

        // A restart without network: the cache and the history give the same signals.
        let second = try store(DaySource(), directory)
        #expect(await second.start() == .cache)
        #expect(await second.dataset?.courses == before.courses)
    }

    @Test func aCorruptHistoryIsMovedAsideAndANewOneStarts() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let history = PublicationHistory(directory: directory)
        let garbage = Data(#"{"format":"ampel-incidence-history","version":1,"publications":[{"#.utf8)
        try garbage.write(to: history.fileURL)
        let source = DaySource()
        let store = try store(source, directory)
        _ = await store.start()
        #expect(await store.currentCounters.cacheErrors == 1)
        let aside = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("incidence-history.json.corrupt-") }
        #expect(aside.count == 1)
        #expect(try Data(contentsOf: directory.appendingPathComponent(try #require(aside.first))) == garbage)
        _ = await store.refresh()
        #expect(try history.load().map(\.date) == [day("2021-03-01")])
        #expect(await store.dataset?.courses["09162"]?.trend == nil, "one day is not enough for a trend")
        #expect(await store.dataset?.courses["09162"]?.inForce?.since == day("2021-03-01"), "one day: in force is measured")
    }
}
