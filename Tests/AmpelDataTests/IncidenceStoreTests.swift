import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Testing

/// The store: which answer may replace the data in force, start-up order, staleness.
@Suite struct IncidenceStoreTests {
    let ruleSet = RuleSetCatalog.standard()

    func makeStore(_ server: HTTPFixtureServer, cache: DatasetCache? = nil, fallback: Bool = false,
                   timeoutClock: TestClock = TestClock(), now: ManualDate = ManualDate("2020-11-05T12:00:00Z")) -> IncidenceStore {
        var bundled: (@Sendable () throws(DataError) -> Dataset)?
        if fallback {
            bundled = { () throws(DataError) -> Dataset in try BundledData.shared.snapshot() }
        }
        return IncidenceStore(
            source: makeClient(server, timeoutClock: timeoutClock), cache: cache, ruleSet: ruleSet,
            fallback: bundled, now: now.function, logger: quietLogger)
    }

    /// Every fault: the reason reported and counted, the data in force unchanged, the next good answer taken.
    @Test(arguments: [
        (HTTPFixtureServer.Fault.status(500), DataError.Reason.http),
        (.status(503), .http),
        (.stall, .timeout),
        (.arcgisError(code: 500, message: "Error performing query operation"), .apiError),
        (.truncatedBody, .malformed),
        (.connectionCut, .network),
        (.renamedField(from: "cases7_per_100k", to: "cases7_per_100k_neu"), .missingField),
        (.emptyFeatures, .empty),
        (.lastUpdate("01.11.2020, 00:00 Uhr"), .outdated),
    ])
    func aRejectedAnswerKeepsTheDataInForce(fault: HTTPFixtureServer.Fault, reason: DataError.Reason) async throws {
        try await withServer(serving: "2020-11-05") { server in
            let clock = TestClock()
            let store = makeStore(server, timeoutClock: clock)
            guard case .updated(nil, let held, _) = await store.refresh() else {
                Issue.record("the first good answer was not taken")
                return
            }
            server.inject(fault)
            let refresh = Task { await store.refresh() }
            if fault == .stall {
                await timeOut(request: 2, of: server, clock: clock)
            }
            let outcome = await refresh.value
            guard case .rejected(let error) = outcome else {
                Issue.record("\(fault) was not rejected: \(outcome)")
                return
            }
            #expect(error.reason == reason, "\(error.message)")
            #expect(await store.dataset == held)
            let counters = await store.currentCounters
            #expect(counters.rejections == [reason: 1])
            #expect(await store.status(now: Date()).lastError == error)

            // The RKI publishes the next day; the store takes it.
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-11-23"))
            guard case .updated(let previous, let current, _) = await store.refresh() else {
                Issue.record("the next good answer was not taken")
                return
            }
            #expect(previous == held)
            #expect(current.date == day("2020-11-23"))
            #expect(await store.dataset == current)
        }
    }

    @Test func rejectionsAreCountedPerReason() async throws {
        try await withServer { server in
            let store = makeStore(server)
            _ = await store.refresh()
            for fault in [HTTPFixtureServer.Fault.status(500), .status(502), .truncatedBody] {
                server.inject(fault)
                _ = await store.refresh()
            }
            let counters = await store.currentCounters
            #expect(counters.rejections == [.http: 2, .malformed: 1])
            #expect(counters.checks == 4)
            #expect(counters.updates == 1)
        }
    }

    @Test func aCheckCancelledByShutdownIsNeitherCountedNorAFailure() async throws {
        try await withServer { server in
            let store = makeStore(server)
            _ = await store.refresh()
            server.inject(.stall)
            let refresh = Task { await store.refresh() }
            await server.waitForRequests(2)
            refresh.cancel()
            guard case .rejected = await refresh.value else {
                Issue.record("a cancelled check did not end as rejected")
                return
            }
            let status = await store.status(now: isoDate("2020-11-05T12:00:00Z"))
            #expect(status.counters.checks == 1)
            #expect(status.counters.rejections.isEmpty)
            #expect(status.stale == false)
            #expect(status.dataset?.date == day("2020-11-05"))
        }
    }

    @Test func theSamePublicationIsUnchanged() async throws {
        try await withServer { server in
            let store = makeStore(server)
            _ = await store.refresh()
            #expect(await store.refresh() == .unchanged)
            #expect(await store.currentCounters.unchanged == 1)
        }
    }

    @Test func anOlderPublicationIsRejectedAsOutdated() async throws {
        try await withServer(serving: "2020-11-23") { server in
            let store = makeStore(server)
            _ = await store.refresh()
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-11-05"))
            guard case .rejected(let error) = await store.refresh() else {
                Issue.record("an older publication was taken")
                return
            }
            #expect(error.reason == .outdated)
            #expect(await store.dataset?.date == day("2020-11-23"))
        }
    }

    /// From 2020-11-05 to 2020-11-23 exactly the districts whose phase differs, computed here
    /// from the raw files with the bounds written out.
    @Test func aNewPublicationReportsExactlyTheChangedDistricts() async throws {
        let before = try rawBavarianIncidences(day: "2020-11-05")
        let after = try rawBavarianIncidences(day: "2020-11-23")
        let expected = Set(before.keys.filter { expectedPhase(before[$0]!) != expectedPhase(after[$0] ?? -1) })
        #expect(!expected.isEmpty && expected.count < 96, "the two days differ in some districts only")
        try await withServer(serving: "2020-11-05") { server in
            let store = makeStore(server)
            guard case .updated(nil, let first, let all) = await store.refresh() else {
                Issue.record("first answer not taken")
                return
            }
            #expect(all == Set(before.keys), "without previous data every district is new")
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-11-23"))
            guard case .updated(let previous, let current, let changed) = await store.refresh() else {
                Issue.record("the new publication was not taken")
                return
            }
            #expect(previous == first)
            #expect(current.date == day("2020-11-23"))
            #expect(changed == expected)
        }
    }

    @Test func districtsThatAppearOrDisappearCountAsChanged() throws {
        let full = try BundledData.shared.snapshot(on: day("2020-11-05"))
        var fewer = full.districts
        fewer["09162"] = nil
        fewer["05315"] = nil  // Köln: outside the region, does not count
        let partial = Dataset(date: full.date, source: "test", districts: fewer)
        #expect(full.districtsWithChangedPhase(since: partial, ruleSet: ruleSet) == ["09162"])
        #expect(partial.districtsWithChangedPhase(since: full, ruleSet: ruleSet) == ["09162"])
        #expect(full.districtsWithChangedPhase(since: full, ruleSet: ruleSet).isEmpty)
    }

    // MARK: - Start-up order

    @Test func startsFromTheCacheThenTakesTheLiveAnswer() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        let cached = try BundledData.shared.snapshot(on: day("2020-10-15"))
        try cache.save(cached, savedAt: isoDate("2020-10-15T08:00:00Z"))
        try await withServer(serving: "2020-11-05") { server in
            let store = makeStore(server, cache: cache, fallback: true)
            #expect(await store.start() == .cache)
            #expect(await store.dataset == cached)
            #expect(server.requestCount == 0, "start-up does not wait for the network")
            guard case .updated(let previous, let current, _) = await store.refresh() else {
                Issue.record("live answer not taken")
                return
            }
            #expect(previous == cached)
            #expect(current.date == day("2020-11-05"))
            // The new data is the cache now.
            let reloaded = try cache.load()
            #expect(reloaded?.dataset == current)
        }
    }

    @Test func withoutACacheStartsFromTheBundledSnapshotWhichAnyLiveAnswerReplaces() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        try await withServer(serving: "2020-11-05") { server in
            let store = makeStore(server, cache: cache, fallback: true)
            #expect(await store.start() == .bundled)
            #expect(await store.dataset == (try BundledData.shared.snapshot()))
            // The bundled fallback (2020-11-23) is a stand-in: the live answer replaces it although older.
            guard case .updated(_, let current, _) = await store.refresh() else {
                Issue.record("live answer not taken over the fallback")
                return
            }
            #expect(current.date == day("2020-11-05"))
            #expect(current.source == "arcgis")
            #expect(try cache.load()?.dataset == current)
            // From now on older answers are outdated again.
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-10-15"))
            guard case .rejected(let error) = await store.refresh() else {
                Issue.record("older answer taken")
                return
            }
            #expect(error.reason == .outdated)
        }
    }

    @Test func aCorruptCacheIsReportedAndMovedAside() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        let garbage = Data("{\"format\": \"ampel-incidence-cache\", \"version\": 1, \"districts\": [".utf8)
        try garbage.write(to: cache.fileURL)
        try await withServer(serving: "2020-11-05") { server in
            let store = makeStore(server, cache: cache, fallback: true)
            #expect(await store.start() == .bundled)
            #expect(await store.currentCounters.cacheErrors == 1)
            #expect(!FileManager.default.fileExists(atPath: cache.fileURL.path), "moved aside, so the next start does not trip over it")
            let aside = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("incidence.json.corrupt-") }
            #expect(aside.count == 1)
            #expect(aside.first?.wholeMatch(of: /incidence\.json\.corrupt-\d{8}T\d{6}Z/) != nil, "\(aside)")
            let onDisk = try Data(contentsOf: directory.appendingPathComponent(try #require(aside.first)))
            #expect(onDisk == garbage, "content kept as it was, for whoever looks into it")
            _ = await store.refresh()
            let reloaded = try cache.load()
            #expect(reloaded?.dataset.date == day("2020-11-05"))
        }
    }

    @Test func aFailedRefreshDoesNotTouchTheCache() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        try await withServer(serving: "2020-11-05") { server in
            let store = makeStore(server, cache: cache)
            _ = await store.refresh()
            let before = try Data(contentsOf: cache.fileURL)
            server.inject(.renamedField(from: "cases7_per_100k", to: "x"))
            _ = await store.refresh()
            #expect(try Data(contentsOf: cache.fileURL) == before)
        }
    }

    @Test func aFixedSourceIsLoadedDirectlyAndNeverStaleByAge() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        try cache.save(BundledData.shared.snapshot(on: day("2020-11-23")))
        let store = IncidenceStore(source: SnapshotSource(day: day("2020-11-05")), cache: cache, logger: quietLogger)
        #expect(await store.start() == .source)
        #expect(await store.dataset?.date == day("2020-11-05"), "the chosen snapshot, not the cache")
        #expect(await store.isStale(now: isoDate("2026-01-01T00:00:00Z")) == false)

        let history = IncidenceStore(source: BundledSource(day: day("2020-12-24"), .history), logger: quietLogger)
        #expect(await history.start() == .source)
        #expect(await history.dataset?.date == day("2020-12-24"))
        #expect(await history.isStale(now: isoDate("2026-01-01T00:00:00Z")) == false)
    }

    @Test func aBrokenSnapshotFileLeavesNoData() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("snapshot.json")
        try Data("{\"error\": {\"code\": 400, \"message\": \"Invalid query\"}}".utf8).write(to: file)
        let store = IncidenceStore(source: SnapshotSource(file: file), logger: quietLogger)
        #expect(await store.start() == StartOrigin.none)
        #expect(await store.dataset == nil)
        #expect(await store.status(now: Date()).lastError?.reason == .apiError)
        #expect(await store.isStale(now: Date()))
    }

    @Test func aSnapshotFileIsDecodedLikeALiveAnswer() async throws {
        let dataset = try await SnapshotSource(file: RecordedRKI.url(day: "2020-11-23")).fetch()
        #expect(dataset.date == day("2020-11-23"))
        #expect(dataset.districts.count == 412)
    }

    // MARK: - Staleness

    /// 2020-11-05 was published at 00:00 in Germany (CET), 2020-11-04T23:00Z; 48 hours later
    /// is 2020-11-06T23:00Z.
    @Test func dataIsStaleAfterTheMaximumAgeFromItsPublicationDay() async throws {
        try await withServer(serving: "2020-11-05") { server in
            let store = makeStore(server)
            _ = await store.refresh()
            #expect(await store.isStale(now: isoDate("2020-11-05T08:00:00Z")) == false)
            #expect(await store.isStale(now: isoDate("2020-11-06T22:59:00Z")) == false)
            #expect(await store.isStale(now: isoDate("2020-11-06T23:01:00Z")) == true)
        }
        #expect(IncidenceStore.age(of: day("2020-11-05"), at: isoDate("2020-11-05T00:00:00Z")) == .seconds(3600))
        #expect(IncidenceStore.age(of: day("2020-07-01"), at: isoDate("2020-07-01T00:00:00Z")) == .seconds(7200), "summer time")
    }

    @Test func theMaximumAgeIsConfigurable() async throws {
        try await withServer(serving: "2020-11-05") { server in
            let store = IncidenceStore(source: makeClient(server), maximumAge: .seconds(24 * 3600), fallback: nil, logger: quietLogger)
            _ = await store.refresh()
            #expect(await store.isStale(now: isoDate("2020-11-05T22:00:00Z")) == false)
            #expect(await store.isStale(now: isoDate("2020-11-05T23:30:00Z")) == true)
        }
    }

    @Test func dataIsStaleWhileTheSourceFailsAfterItsLastSuccess() async throws {
        try await withServer(serving: "2020-11-05") { server in
            let now = isoDate("2020-11-05T12:00:00Z")
            let store = makeStore(server)
            #expect(await store.isStale(now: now), "no data yet")
            _ = await store.refresh()
            #expect(await store.isStale(now: now) == false)
            server.inject(.status(500))
            _ = await store.refresh()
            #expect(await store.isStale(now: now), "failed since the last success")
            #expect(await store.status(now: now).failedSinceSuccess)
            #expect(await store.refresh() == .unchanged)
            #expect(await store.isStale(now: now) == false, "an unchanged answer is a success")
        }
    }

    @Test func statusCarriesEverything() async throws {
        try await withServer(serving: "2020-11-05") { server in
            let clock = ManualDate("2020-11-05T09:30:00Z")
            let store = makeStore(server, now: clock)
            _ = await store.refresh()
            let status = await store.status(now: clock.date)
            #expect(status.dataset?.date == day("2020-11-05"))
            #expect(status.source == "arcgis")
            #expect(status.stale == false)
            #expect(status.lastSuccess == clock.date)
            #expect(status.lastError == nil)
        }
    }
}
