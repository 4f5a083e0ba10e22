import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Testing

/// The live source `rki` against a real HTTP server on loopback serving files in the RKI's
/// district schema, made from the bundled real Bavarian values and the national file.
@Suite struct RKIDatasetClientTests {
    let ruleSet = RuleSetCatalog.standard()

    func client(_ server: HTTPFixtureServer, clock: TestClock = TestClock(), attempts: Int = 1, window: Int = 28) -> RKIDatasetClient {
        RKIDatasetClient(
            configuration: .init(url: server.fileURL, windowDays: window, region: .bavaria, stallTimeout: .seconds(30),
                                 timeout: .seconds(600), clock: clock,
                                 retry: RetryPolicy(maxAttempts: attempts, baseDelay: .seconds(1), sleep: SleepRecorder().sleep)),
            logger: quietLogger)
    }

    /// The loopback server (``AmpelTestSupport/withServer(serving:maxRecordCount:_:)``) serving `file`.
    func withServer<T>(_ file: RKIDistrictFile, _ body: (HTTPFixtureServer) async throws -> T) async throws -> T {
        try await AmpelTestSupport.withServer(serving: nil) { server in
            server.serveFile(file.render())
            return try await body(server)
        }
    }

    @Test("the first check reads the newest day with every district's value as written; a second check with the ETag costs a 304")
    func firstFetchThenNotModified() async throws {
        let file = try RKIDistrictFile(from: "2021-10-20", to: "2021-11-22")
        try await withServer(file) { server in
            let client = client(server)
            guard case .publication(let publication) = try await client.check(ifChanged: nil) else {
                Issue.record("no publication")
                return
            }
            #expect(publication.newest.date.iso == "2021-11-22")
            #expect(publication.newest.districts.count == 400)
            #expect(publication.earlier.map(\.date.iso) == file.days.suffix(28).dropLast().map { $0 })
            #expect(publication.skippedRows == 2 * file.days.count)
            for ags in DistrictDirectory.germany.codes {
                #expect(publication.newest[ags]?.incidence == file.incidence(day: "2021-11-22", id: ags), "\(ags)")
            }
            #expect(publication.newest["09162"]?.district.population == file.population(id: "09162"))
            let validators = try #require(publication.validators)
            #expect(validators.etag == "\"\(server.fileETag ?? "")\"")

            let again = try await client.check(ifChanged: validators)
            #expect(again == .notModified)
            #expect(server.fileNotModifiedCount == 1)
            #expect(server.requests.last?.headers["if-none-match"] == validators.etag)
        }
    }

    @Test("every broken file or transfer is a rejection with its reason", arguments: [
        "status 503", "body cut short", "connection cut", "stalled body", "renamed column", "duplicate row",
        "missing Bavarian district", "unparsable number", "header only",
    ])
    func rejections(_ fault: String) async throws {
        var file = try RKIDistrictFile(from: "2021-11-15", to: "2021-11-22")
        var data: Data?
        switch fault {
        case "duplicate row": file.duplicate(day: "2021-11-20", id: "05111")
        case "missing Bavarian district": file.remove(day: "2021-11-22", id: "09780")
        default: break
        }
        let text = String(decoding: file.render(), as: UTF8.self)
        switch fault {
        case "renamed column": data = Data(text.replacingOccurrences(of: "Inzidenz_7-Tage", with: "Inzidenz_7Tage").utf8)
        case "unparsable number": data = Data(text.replacingOccurrences(of: "2021-11-18,09162,1484226,", with: "2021-11-18,09162,1484226.5,").utf8)
        case "header only": data = Data((RKIDistrictFile.header + "\n").utf8)
        default: break
        }
        let expected: DataError.Reason = switch fault {
        case "status 503": .http
        case "body cut short": .malformed
        case "connection cut": .network
        case "stalled body": .timeout
        case "renamed column": .missingField
        case "duplicate row": .duplicateDistrict
        case "missing Bavarian district": .missingDistricts
        case "unparsable number": .invalidValue
        default: .empty
        }
        try await withServer(file) { server in
            if let data { server.serveFile(data) }
            switch fault {
            case "status 503": server.inject(.status(503))
            case "body cut short": server.inject(.truncatedBody)
            case "connection cut": server.inject(.connectionCut)
            case "stalled body": server.inject(.stalledBody)
            default: break
            }
            let clock = TestClock()
            let check = Task { try await client(server, clock: clock).check(ifChanged: nil) }
            if fault == "stalled body" {
                // No byte for a whole stall period: two watchdog rounds without progress.
                await server.waitForStalledBodies(1)
                for _ in 0..<2 {
                    await clock.waitForSleepers(2)
                    clock.advance(by: .seconds(30))
                }
            }
            do {
                let answer = try await check.value
                Issue.record("\(fault) was accepted: \(answer)")
            } catch let error as DataError {
                #expect(error.reason == expected, "\(fault): \(error.message)")
            }
        }
    }

    @Test("a 503 is retried and the next attempt's file is taken")
    func retried() async throws {
        let file = try RKIDistrictFile(from: "2021-11-21", to: "2021-11-22")
        try await withServer(file) { server in
            server.inject(.status(503))
            guard case .publication(let publication) = try await client(server, attempts: 3).check(ifChanged: nil) else {
                Issue.record("no publication")
                return
            }
            #expect(publication.newest.date.iso == "2021-11-22")
            #expect(server.fileOKCount == 1)
        }
    }

    /// The store on the real server, day by day as the RKI publishes.
    @Test("new day, revision of past days, same-day correction and a wrong release, through the store")
    func publicationsThroughTheStore() async throws {
        var file = try RKIDistrictFile(from: "2021-07-20", to: "2021-08-21")
        try await withServer(file) { server in
            let store = IncidenceStore(source: client(server), ruleSet: ruleSet, region: .bavaria, fallback: nil, logger: quietLogger)
            guard case .updated(nil, let first, _) = await store.refresh() else { Issue.record("first file not taken"); return }
            #expect(first.date.iso == "2021-08-21")
            // SK München: 48.5 (yellow) on the 21st, from the bundled history.
            #expect(first["09162"]?.incidence == 48.5)

            // Nothing new: 304.
            #expect(await store.refresh() == .unchanged)
            #expect(await store.currentCounters.notModified == 1)

            // The next day; the file also revises the 21st upwards for every district.
            var next = try RKIDistrictFile(from: "2021-07-20", to: "2021-08-22")
            for id in DistrictDirectory.germany.codes {
                next.set(day: "2021-08-21", id: id, incidence: (next.incidence(day: "2021-08-21", id: id) ?? 0) + 3)
            }
            server.serveFile(next.render())
            guard case .updated(let previous, let current, let changed) = await store.refresh() else { Issue.record("next day not taken"); return }
            #expect(previous?.date.iso == "2021-08-21")
            #expect(current["09162"]?.incidence == 54.4)
            #expect(changed.contains("09162"), "yellow to red")
            let kept = try #require(await store.window.first { $0.date.iso == "2021-08-21" })
            #expect(kept["09162"]?.incidence == 48.5, "the 21st stays as first read")
            #expect(await store.currentCounters.revisions == 96, "the region's districts: the days before the newest are kept for them only")
            // The revision moved no district's phase-in-force start: where the phase held and began
            // inside both 28-day windows (the earliest `since` is the window's first day), `since` is the same.
            var compared = 0
            for entry in current.districts(in: .bavaria) {
                let ags = entry.district.ags
                guard let before = first.courses[ags]?.inForce, let after = current.courses[ags]?.inForce, before.phase == after.phase,
                      before.since > Day(iso: "2021-07-26")! else { continue }
                compared += 1
                #expect(after.since == before.since, "\(ags)")
            }
            #expect(compared > 10)

            // A corrected file for the 22nd: applied.
            next.set(day: "2021-08-22", id: "09162", incidence: 30)
            server.serveFile(next.render())
            guard case .updated(_, let corrected, let correctedChanged) = await store.refresh() else { Issue.record("correction not applied"); return }
            #expect(corrected["09162"]?.incidence == 30)
            #expect(correctedChanged == ["09162"])
            #expect(await store.currentCounters.corrections == 1)

            // A wrong release: every district ten times the day before. Held, then applied when the next check still shows it.
            file = next
            var wrong = try RKIDistrictFile(from: "2021-07-20", to: "2021-08-23")
            for id in DistrictDirectory.germany.codes {
                wrong.set(day: "2021-08-23", id: id, incidence: ((file.incidence(day: "2021-08-22", id: id) ?? 0) + 1) * 10)
            }
            server.serveFile(wrong.render())
            guard case .held(let error) = await store.refresh() else { Issue.record("wrong release not held"); return }
            #expect(error.reason == .implausible)
            #expect(await store.dataset?.date.iso == "2021-08-22")
            guard case .updated(_, let applied, _) = await store.refresh() else { Issue.record("held release not applied on the next check"); return }
            #expect(applied.date.iso == "2021-08-23")
            #expect(server.fileNotModifiedCount == 2, "the check after holding was answered 304")
        }
    }
}

/// A check whose attempts fail says so while it waits to retry, not after its last attempt.
@Suite struct FailedAttemptTests {
    @Test("a refused attempt is in the store's status (retrying) while the retry waits; the staleness does not change for it; the check's end clears it")
    func retryingShownAtOnce() async throws {
        let port = try MosquittoBroker.freeLoopbackPort()
        // The pause before the retry lasts until the test lets it end.
        let (pauses, pauseStarted) = AsyncStream.makeStream(of: Void.self)
        let (releases, release) = AsyncStream.makeStream(of: Void.self)
        // Two attempts: one pause, so the stream has one consumer.
        let policy = RetryPolicy(maxAttempts: 2, baseDelay: .seconds(1), sleep: { _ in
            pauseStarted.yield()
            for await _ in releases { break }
        })
        let client = RKIDatasetClient(configuration: .init(url: "http://127.0.0.1:\(port)/landkreise.csv", region: .bavaria, retry: policy),
                                      logger: quietLogger)
        let store = IncidenceStore(source: client, region: .bavaria, logger: quietLogger)
        await store.start()
        let staleBefore = await store.status().stale
        let (reports, report) = AsyncStream.makeStream(of: DataError.self)
        let check = Task { await store.refresh(attemptFailed: { report.yield($0) }) }

        var pauseIterator = pauses.makeAsyncIterator()
        _ = await pauseIterator.next()
        var reportIterator = reports.makeAsyncIterator()
        let reported = try #require(await reportIterator.next())
        let during = await store.status()
        #expect(during.retrying == reported)
        #expect(reported.reason == .network && reported.message.contains("refused"), "\(reported)")
        #expect(during.stale == staleBefore && !during.failedSinceSuccess, "a retry under way changes no signal")
        #expect(during.lastCheck != nil)
        #expect(during.standIn, "the bundled snapshot stands in")

        release.yield()
        guard case .rejected(let error) = await check.value else {
            Issue.record("the second refused attempt ends the check")
            return
        }
        let after = await store.status()
        #expect(after.retrying == nil)
        #expect(after.lastError == error && after.failedSinceSuccess)
    }
}
