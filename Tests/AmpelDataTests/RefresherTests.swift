import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Testing

/// The 10-minute refresh against the loopback server, on a test clock: no real waiting.
@Suite struct RefresherTests {
    @Test func reportsPublicationsFailuresAndStaleness() async throws {
        let before = try rawBavarianIncidences(day: "2020-11-05")
        let after = try rawBavarianIncidences(day: "2020-11-23")
        let expectedChanged = Set(before.keys.filter { expectedPhase(before[$0]!) != expectedPhase(after[$0] ?? -1) })

        try await withServer(serving: "2020-11-05") { server in
            let wall = ManualDate("2020-11-05T12:00:00Z")
            let store = IncidenceStore(source: makeClient(server), fallback: nil, now: wall.function, logger: quietLogger)
            let clock = TestClock()
            let refresher = Refresher(store: store, interval: .seconds(600), clock: clock, now: wall.function)
            let task = Task { await refresher.run() }
            var events = refresher.events.makeAsyncIterator()

            #expect(await events.next() == .loaded(origin: StartOrigin.none, dataset: nil))
            // The first check runs at once.
            guard case .published(nil, let first, let all)? = await events.next() else {
                Issue.record("no first publication")
                return
            }
            #expect(first.date == day("2020-11-05"))
            #expect(all.count == 96)
            #expect(await events.next() == .staleChanged(false), "there was no data, now there is")
            #expect(server.requestCount == 1)

            // The RKI publishes; nothing is asked before the interval is over.
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-11-23"))
            wall.set("2020-11-23T08:00:00Z")
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(599))
            #expect(clock.sleeperCount == 1, "still waiting after 9:59")
            clock.advance(by: .seconds(1))
            guard case .published(let previous, let current, let changed)? = await events.next() else {
                Issue.record("no second publication")
                return
            }
            #expect(previous == first)
            #expect(current.date == day("2020-11-23"))
            #expect(changed == expectedChanged)
            #expect(server.requestCount == 2)

            // The service fails: the data stays, and is stale now.
            server.inject(.status(500))
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(600))
            guard case .failed(let error)? = await events.next() else {
                Issue.record("no failure event")
                return
            }
            #expect(error.reason == .http)
            #expect(await events.next() == .staleChanged(true))
            #expect(await store.dataset == current)

            // It answers again with the same publication: fresh again, no publication event.
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(600))
            #expect(await events.next() == .checked, "the source answered the publication in force")
            #expect(await events.next() == .staleChanged(false))
            #expect(server.requestCount == 4)

            // Two days later with no new publication the data becomes stale by age.
            wall.set("2020-11-25T08:00:00Z")
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(600))
            #expect(await events.next() == .checked, "the source answered the publication in force")
            #expect(await events.next() == .staleChanged(true))

            task.cancel()
            await task.value
            #expect(await events.next() == nil, "the stream ends with run()")
        }
    }

    @Test func startsFromTheCacheBeforeTheFirstCheck() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        let cached = try BundledData.shared.snapshot(on: day("2020-11-05"))
        try cache.save(cached)
        try await withServer(serving: "2020-11-05") { server in
            server.inject(.status(503))
            let wall = ManualDate("2020-11-05T12:00:00Z")
            let store = IncidenceStore(source: makeClient(server), cache: cache, now: wall.function, logger: quietLogger)
            let clock = TestClock()
            let refresher = Refresher(store: store, clock: clock, now: wall.function)
            let task = Task { await refresher.run() }
            var events = refresher.events.makeAsyncIterator()
            #expect(await events.next() == .loaded(origin: .cache, dataset: cached))
            guard case .failed(let error)? = await events.next() else {
                Issue.record("expected the failed first check")
                return
            }
            #expect(error.reason == .http)
            #expect(await events.next() == .staleChanged(true))
            #expect(await store.dataset == cached, "the cached data stays in force")
            // The default interval is ten minutes.
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(600))
            #expect(await events.next() == .checked, "the source answered the publication in force")
            #expect(await events.next() == .staleChanged(false), "same publication as the cache: fresh, not new")
            task.cancel()
            await task.value
        }
    }
}
