import AmpelData
import AmpelDomain
import Foundation
import Synchronization
import Testing

/// The store with a source that carries its past (the RKI's district file): days kept as first
/// read, same-day corrections, conditional checks, and the guard against a wrong release.
@Suite struct KeptAsPublishedTests {
    /// Answers what the test queued, and records the validators it was asked with.
    final class ScriptedSource: IncidenceSource {
        private let state = Mutex<(answers: [SourceAnswer], asked: [HTTPValidators?])>(([], []))
        var name: String { "rki" }
        var isLive: Bool { true }

        func queue(_ answer: SourceAnswer) { state.withLock { $0.answers.append(answer) } }
        var asked: [HTTPValidators?] { state.withLock { $0.asked } }

        func fetch() async throws(DataError) -> Dataset {
            throw DataError(.notAvailable, "the store must ask with check(ifChanged:)")
        }

        func check(ifChanged validators: HTTPValidators?) async throws(DataError) -> SourceAnswer {
            let next: SourceAnswer? = state.withLock { state in
                state.asked.append(validators)
                return state.answers.isEmpty ? nil : state.answers.removeFirst()
            }
            guard let next else { throw DataError(.network, "nothing queued") }
            return next
        }
    }

    /// The 96 Bavarian districts on `iso`, each at `value(ags)`.
    static func day(_ iso: String, _ value: (String) -> Double) -> Dataset {
        var districts: [String: DistrictIncidence] = [:]
        for district in DistrictDirectory.germany.districts(in: .bavaria) {
            districts[district.ags] = DistrictIncidence(district: district, incidence: value(district.ags), stateIncidence: nil)
        }
        return Dataset(date: Day(iso: iso)!, source: "rki", districts: districts)
    }

    /// A district's base value: spread over all four Bavarian phases.
    static func base(_ ags: String) -> Double { Double(Int(ags)! % 40) * 4 }

    static func file(_ days: [String], etag: String, newest: ((String) -> Double)? = nil) -> SourceAnswer {
        let all = days.map { day($0, base) }
        var last = all[all.count - 1]
        if let newest { last = day(days[days.count - 1], newest) }
        return .publication(Publication(newest: last, earlier: Array(all.dropLast()),
                                        validators: HTTPValidators(etag: etag, lastModified: nil), skippedRows: 2))
    }

    func makeStore(_ source: ScriptedSource, guard releaseGuard: ReleaseGuard = .standard, directory: URL? = nil) -> IncidenceStore {
        IncidenceStore(source: source, cache: directory.map { DatasetCache(directory: $0) }, ruleSet: RuleSetCatalog.standard(),
                       region: .bavaria, fallback: nil, logger: quietLogger,
                       history: directory.map { PublicationHistory(directory: $0) }, releaseGuard: releaseGuard)
    }

    @Test("a fresh install takes the file's past days for trend and day counts; a later file's revisions of them are counted, not applied")
    func revisionsAreCounted() async throws {
        let source = ScriptedSource()
        let store = makeStore(source)
        source.queue(Self.file(["2026-08-19", "2026-08-20", "2026-08-21"], etag: "\"a\""))
        guard case .updated(nil, let first, _) = await store.refresh() else { Issue.record("first file not taken"); return }
        #expect(first.date.iso == "2026-08-21")
        #expect(await store.window.map(\.date.iso) == ["2026-08-19", "2026-08-20", "2026-08-21"])
        #expect(first.courses["09162"] != nil)

        // The next day's file revises the 21st (late reports): Ampel keeps what it first read.
        var next = Self.file(["2026-08-20", "2026-08-21", "2026-08-22"], etag: "\"b\"")
        if case .publication(var p) = next {
            p.earlier[1] = Self.day("2026-08-21") { Self.base($0) + 1 }
            next = .publication(p)
        }
        source.queue(next)
        guard case .updated(let previous, let current, _) = await store.refresh() else { Issue.record("next day not taken"); return }
        #expect(previous?.date.iso == "2026-08-21")
        #expect(current.date.iso == "2026-08-22")
        let kept = try #require(await store.window.first { $0.date.iso == "2026-08-21" })
        #expect(kept["09162"]?.incidence == Self.base("09162"))
        let counters = await store.currentCounters
        #expect(counters.revisions == 96)
        #expect(counters.skippedRows == 4)
        #expect(counters.updates == 2)
        // The second check sent the first file's validators.
        #expect(source.asked == [nil, HTTPValidators(etag: "\"a\"", lastModified: nil)])
    }

    @Test("a new file for the day in force with other values replaces it; the same values again change nothing; a 304 is counted")
    func sameDayCorrection() async throws {
        let source = ScriptedSource()
        let store = makeStore(source)
        source.queue(Self.file(["2026-08-21", "2026-08-22"], etag: "\"a\""))
        _ = await store.refresh()
        source.queue(Self.file(["2026-08-21", "2026-08-22"], etag: "\"b\"") { Self.base($0) + 0.5 })
        guard case .updated(_, let corrected, _) = await store.refresh() else { Issue.record("correction not applied"); return }
        #expect(corrected["09162"]?.incidence == Self.base("09162") + 0.5)
        #expect(await store.window.last?["09162"]?.incidence == Self.base("09162") + 0.5)
        source.queue(Self.file(["2026-08-21", "2026-08-22"], etag: "\"c\"") { Self.base($0) + 0.5 })
        #expect(await store.refresh() == .unchanged)
        source.queue(.notModified)
        #expect(await store.refresh() == .unchanged)
        let counters = await store.currentCounters
        #expect(counters.corrections == 1)
        #expect(counters.unchanged == 1)
        #expect(counters.notModified == 1)
        #expect(source.asked.last == HTTPValidators(etag: "\"c\"", lastModified: nil))
        #expect(await store.status(now: Date()).lastCheck != nil)
    }

    @Test("a wrong release is held for one check, then applied when the next check still shows it (a 304, or the same file)", arguments: [true, false])
    func wrongReleaseHeld(notModified: Bool) async throws {
        let source = ScriptedSource()
        let store = makeStore(source)
        source.queue(Self.file(["2026-08-21", "2026-08-22"], etag: "\"a\""))
        _ = await store.refresh()
        let inForce = await store.dataset
        // Every district ten times its value the day before (and +10 where it was 0).
        let wrong = Self.file(["2026-08-22", "2026-08-23"], etag: "\"wrong\"") { Self.base($0) * 10 + 10 }
        source.queue(wrong)
        guard case .held(let error) = await store.refresh() else { Issue.record("not held"); return }
        #expect(error.reason == .implausible)
        #expect(error.message.contains("96 of 96 districts"))
        #expect(await store.dataset == inForce)
        #expect(await store.status(now: Date()).held == error)
        source.queue(notModified ? .notModified : wrong)
        guard case .updated(_, let applied, _) = await store.refresh() else { Issue.record("not applied on the second check"); return }
        #expect(applied.date.iso == "2026-08-23")
        #expect(applied["09162"]?.incidence == Self.base("09162") * 10 + 10)
        #expect(await store.status(now: Date()).held == nil)
        #expect(await store.currentCounters.held == 1)
        // The check after holding asked with the held file's validators.
        #expect(source.asked[2] == HTTPValidators(etag: "\"wrong\"", lastModified: nil))
    }

    @Test("a held release followed by a plausible one: the plausible one is applied and nothing stays held")
    func heldThenReplaced() async throws {
        let source = ScriptedSource()
        let store = makeStore(source)
        source.queue(Self.file(["2026-08-21", "2026-08-22"], etag: "\"a\""))
        _ = await store.refresh()
        source.queue(Self.file(["2026-08-22", "2026-08-23"], etag: "\"wrong\"") { Self.base($0) * 10 + 10 })
        guard case .held = await store.refresh() else { Issue.record("not held"); return }
        source.queue(Self.file(["2026-08-22", "2026-08-23"], etag: "\"fixed\"") { Self.base($0) + 1 })
        guard case .updated(_, let applied, _) = await store.refresh() else { Issue.record("fixed file not applied"); return }
        #expect(applied["09162"]?.incidence == Self.base("09162") + 1)
        #expect(await store.status(now: Date()).held == nil)
    }

    @Test("the guard: a few districts jumping is real news; low incidences moving by small amounts are noise; off holds nothing")
    func guardThreshold() {
        let before = Self.day("2026-08-22") { _ in 0.4 }
        let someJump = Self.day("2026-08-23") { Int($0)! % 10 == 0 ? 30 : 0.6 }
        #expect(ReleaseGuard.standard.verdict(newest: someJump, before: before, region: .bavaria) == nil)
        let noise = Self.day("2026-08-23") { _ in 2.9 }
        #expect(ReleaseGuard.standard.verdict(newest: noise, before: before, region: .bavaria) == nil)
        let wrong = Self.day("2026-08-23") { _ in 40 }
        #expect(ReleaseGuard.standard.verdict(newest: wrong, before: before, region: .bavaria) != nil)
        #expect(ReleaseGuard.off.verdict(newest: wrong, before: before, region: .bavaria) == nil)
        #expect(ReleaseGuard(factor: 50, share: 0.5).verdict(newest: wrong, before: before, region: .bavaria) == nil)
    }

    @Test("the file's validators are kept with the cache: a restarted store asks conditionally at once")
    func validatorsSurviveARestart() async throws {
        let directory = try temporaryDirectory()
        let source = ScriptedSource()
        source.queue(Self.file(["2026-08-21", "2026-08-22"], etag: "\"a\""))
        _ = await makeStore(source, directory: directory).refresh()
        let restarted = ScriptedSource()
        let store = makeStore(restarted, directory: directory)
        #expect(await store.start() == .cache)
        restarted.queue(.notModified)
        #expect(await store.refresh() == .unchanged)
        #expect(restarted.asked == [HTTPValidators(etag: "\"a\"", lastModified: nil)])
        #expect(await store.window.map(\.date.iso) == ["2026-08-21", "2026-08-22"])
    }
}
