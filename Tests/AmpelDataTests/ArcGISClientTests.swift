import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Testing

/// The live client against a real HTTP server on a loopback port.
@Suite struct ArcGISClientTests {
    @Test func fetchesAllPagesOfTheRecordedAnswer() async throws {
        try await withServer(serving: "2020-11-05", maxRecordCount: 100) { server in
            let dataset = try await makeClient(server).fetch()
            // 412 features at most 100 per page: 100, 100, 100, 100, 12.
            let requests = server.requests
            #expect(requests.count == 5)
            #expect(requests.map { $0.query["resultOffset"] } == ["0", "100", "200", "300", "400"])
            #expect(dataset.date == day("2020-11-05"))
            #expect(dataset.source == "arcgis")
            #expect(dataset.districts.count == 412)
            let raw = try rawBavarianIncidences(day: "2020-11-05")
            #expect(raw.count == 96)
            for (rs, incidence) in raw {
                #expect(dataset[rs]?.incidence == incidence, "\(rs)")
            }
        }
    }

    @Test func asksForSmallPagesWhenConfigured() async throws {
        try await withServer(serving: "2020-11-23") { server in
            let dataset = try await makeClient(server, pageSize: 50).fetch()
            #expect(server.requestCount == 9, "412 features in pages of 50")
            #expect(Set(server.requests.map { $0.query["resultRecordCount"] }) == ["50"])
            #expect(dataset.districts.count == 412)
            #expect(dataset.date == day("2020-11-23"))
        }
    }

    @Test func sendsTheDocumentedQueryAndUserAgent() async throws {
        try await withServer { server in
            _ = try await makeClient(server).fetch()
            let request = try #require(server.requests.first)
            #expect(request.method == "GET")
            #expect(request.path == "/query")
            #expect(request.query["where"] == "1=1")
            #expect(request.query["f"] == "json")
            #expect(request.query["returnGeometry"] == "false")
            #expect(request.query["outFields"]?.split(separator: ",").map(String.init)
                == ["RS", "GEN", "BEZ", "county", "EWZ", "BL", "BL_ID", "last_update", "cases7_per_100k", "cases7_bl_per_100k"])
            let agent = try #require(request.userAgent)
            #expect(agent.hasPrefix("ampel/"))
            #expect(agent == DataHTTP.userAgent)
        }
    }

    /// Each fault the service shows in practice, and the reason the client gives for it.
    static let faults: [(HTTPFixtureServer.Fault, DataError.Reason)] = [
        (.status(500), .http),
        (.status(404), .http),
        (.arcgisError(code: 500, message: "Error performing query operation"), .apiError),
        (.truncatedBody, .malformed),
        (.connectionCut, .network),
        (.renamedField(from: "cases7_per_100k", to: "cases7_per_100k_neu"), .missingField),
        (.renamedField(from: "RS", to: "AGS_neu"), .missingField),
        (.emptyFeatures, .empty),
        (.attribute(rs: "09162", field: "cases7_per_100k", value: .double(-3)), .invalidValue),
        (.attribute(rs: "09162", field: "cases7_per_100k", value: .null), .missingField),
        (.attribute(rs: "09162", field: "last_update", value: .string("gestern")), .invalidValue),
        (.attribute(rs: "09162", field: "last_update", value: .string("04.11.2020, 00:00 Uhr")), .invalidValue),
        (.raw(status: 200, body: "<html><body>Wartungsarbeiten</body></html>"), .malformed),
    ]

    @Test(arguments: faults)
    func reportsEachFaultWithItsReason(fault: HTTPFixtureServer.Fault, reason: DataError.Reason) async throws {
        try await withServer { server in
            server.inject(fault)
            let client = makeClient(server, attempts: 1)
            let error = await #expect(throws: DataError.self) { try await client.fetch() }
            #expect(error?.reason == reason, "\(fault): \(error?.message ?? "no error")")
            // The fault was one answer: the next fetch gets the good data.
            let dataset = try await client.fetch()
            #expect(dataset.date == day("2020-11-05"))
            #expect(dataset.districts.count == 412)
        }
    }

    @Test func aFaultOnALaterPageFailsTheWholeFetch() async throws {
        try await withServer(maxRecordCount: 100) { server in
            server.inject(.renamedField(from: "cases7_per_100k", to: "x"), after: 3)
            let error = await #expect(throws: DataError.self) { try await makeClient(server).fetch() }
            #expect(error?.reason == .missingField)
            #expect(error?.message.contains("page 4 (resultOffset 300)") == true, "\(error?.message ?? "")")
            #expect(server.requestCount == 4, "stops at the bad page")
        }
    }

    @Test func pagesFromTwoPublicationsAreRejected() async throws {
        try await withServer(maxRecordCount: 100) { server in
            server.inject(.lastUpdate("23.11.2020, 00:00 Uhr"), after: 2)
            let error = await #expect(throws: DataError.self) { try await makeClient(server).fetch() }
            #expect(error?.reason == .invalidValue)
            #expect(error?.message.contains("mix") == true)
        }
    }

    @Test func tooFewBavarianDistrictsAreRejected() async throws {
        try await withServer(serving: nil) { server in
            try server.serve(recordedAnswer(day: "2020-11-05") { $0 != "09162" })
            let error = await #expect(throws: DataError.self) { try await makeClient(server).fetch() }
            #expect(error?.reason == .missingDistricts)
        }
    }

    @Test func aDuplicateDistrictIsRejected() async throws {
        try await withServer(serving: nil) { server in
            let data = try Data(contentsOf: RecordedRKI.url(day: "2020-11-05"))
            var answer = try JSONValue.parse(data)
            var features = try #require(answer["features"]?.arrayValue)
            features.append(features[200])
            answer["features"] = .array(features)
            try server.serve(answer.data())
            let error = await #expect(throws: DataError.self) { try await makeClient(server).fetch() }
            #expect(error?.reason == .duplicateDistrict)
        }
    }

    @Test func aStallPastTheTimeoutIsATimeout() async throws {
        try await withServer { server in
            server.inject(.stall)
            let clock = TestClock()
            let client = makeClient(server, timeout: .seconds(30), timeoutClock: clock, attempts: 1)
            let fetch = Task { try await client.fetch() }
            await timeOut(request: 1, of: server, clock: clock)
            let error = await #expect(throws: DataError.self) { try await fetch.value }
            #expect(error?.reason == .timeout)
            #expect(error?.message.contains("30") == true, "\(error?.message ?? "")")
            let next = try await client.fetch()
            #expect(next.date == day("2020-11-05"))
        }
    }

    @Test func aStallIsRetried() async throws {
        try await withServer { server in
            server.inject(.stall)
            let sleeps = SleepRecorder()
            let clock = TestClock()
            let fetch = Task { try await makeClient(server, timeoutClock: clock, attempts: 2, sleeps: sleeps).fetch() }
            await timeOut(request: 1, of: server, clock: clock)
            let dataset = try await fetch.value
            #expect(dataset.districts.count == 412)
            #expect(server.requestCount == 2)
            #expect(sleeps.delays.count == 1)
        }
    }

    @Test func theTimeoutCoversAStalledBodyToo() async throws {
        // The real clock with a short timeout: the answer's head arrives, its body never ends.
        try await withServer { server in
            server.inject(.stalledBody)
            let client = ArcGISClient(configuration: .init(url: server.queryURL, timeout: .milliseconds(500), retry: .none),
                                   logger: quietLogger)
            let error = await #expect(throws: DataError.self) { try await client.fetch() }
            #expect(error?.reason == .timeout)
        }
    }

    @Test func transientErrorsAreRetriedWithGrowingPauses() async throws {
        try await withServer { server in
            server.inject(.status(503), times: 2)
            let sleeps = SleepRecorder()
            let dataset = try await makeClient(server, attempts: 4, sleeps: sleeps).fetch()
            #expect(dataset.date == day("2020-11-05"))
            #expect(server.requestCount == 3)
            let delays = sleeps.delays
            try #require(delays.count == 2)
            // Base 2 s, doubled, each shortened by up to half (jitter 0.5).
            #expect(delays[0] >= .seconds(1) && delays[0] <= .seconds(2), "\(delays[0])")
            #expect(delays[1] >= .seconds(2) && delays[1] <= .seconds(4), "\(delays[1])")
        }
    }

    @Test func retriesEndAfterMaxAttempts() async throws {
        try await withServer { server in
            server.inject(.status(500), times: 10)
            let sleeps = SleepRecorder()
            let error = await #expect(throws: DataError.self) { try await makeClient(server, attempts: 3, sleeps: sleeps).fetch() }
            #expect(error?.reason == .http)
            #expect(error?.message.contains("500") == true)
            #expect(server.requestCount == 3)
            #expect(sleeps.delays.count == 2)
        }
    }

    @Test func wrongAnswersAreNotRetried() async throws {
        try await withServer { server in
            server.inject(.arcgisError(code: 400, message: "Invalid query"), times: 1)
            server.inject(.status(404), times: 1)
            let client = makeClient(server, attempts: 4)
            await #expect(throws: DataError.self) { try await client.fetch() }
            #expect(server.requestCount == 1)
            await #expect(throws: DataError.self) { try await client.fetch() }
            #expect(server.requestCount == 2, "404 is not transient")
        }
    }

    @Test func anUnreachableServiceIsANetworkError() async throws {
        // A port that was just free: nothing listens there any more.
        let server = try await HTTPFixtureServer.start()
        let url = server.queryURL
        try await server.shutdown()
        let client = ArcGISClient(configuration: .init(url: url, timeoutClock: TestClock(), retry: .none), logger: quietLogger)
        let error = await #expect(throws: DataError.self) { try await client.fetch() }
        #expect(error?.reason == .network)
        // The system's cause, not the client's: the words a user can act on.
        #expect(error?.message.hasPrefix("cannot reach 127.0.0.1:") == true, "\(String(describing: error?.message))")
        #expect(error?.message.hasSuffix(": connection refused") == true, "\(String(describing: error?.message))")
    }

    @Test func onlyHTTPURLsWithAHostAreUsable() {
        #expect(DataHTTP.isValidURL(ArcGISClient.defaultURL))
        #expect(DataHTTP.isValidURL("http://127.0.0.1:8080/query"))
        #expect(!DataHTTP.isValidURL("ftp://127.0.0.1/query"))
        #expect(!DataHTTP.isValidURL("127.0.0.1:8080/query"))
        #expect(!DataHTTP.isValidURL("http:///query"))
        #expect(!DataHTTP.isValidURL(""))
    }

    @Test func backoffIsExponentialCappedAndJittered() {
        let policy = RetryPolicy(maxAttempts: 10, baseDelay: .seconds(2), maxDelay: .seconds(60), jitter: 0.5)
        #expect(policy.delay(beforeRetry: 1, random: 0) == .seconds(2))
        #expect(policy.delay(beforeRetry: 2, random: 0) == .seconds(4))
        #expect(policy.delay(beforeRetry: 3, random: 0) == .seconds(8))
        #expect(policy.delay(beforeRetry: 3, random: 1) == .seconds(4))
        #expect(policy.delay(beforeRetry: 6, random: 0) == .seconds(60), "64 s capped at 60 s")
        #expect(policy.delay(beforeRetry: 100, random: 0) == .seconds(60))
        let noJitter = RetryPolicy(baseDelay: .seconds(1), jitter: 0)
        #expect(noJitter.delay(beforeRetry: 2, random: 0.9) == .seconds(2))
    }

    @Test func theVerbatimLiveFeatureOf20200921Decodes() throws {
        // One feature exactly as the live service sent it (no cases7_bl_per_100k then).
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/rki_landkreisdaten_response_excerpt_2020-09-21_SK_Flensburg.json")
        let page = try ArcGISDecoder().decodePage(Data(contentsOf: url))
        #expect(page.date == day("2020-09-21"))
        let flensburg = try #require(page.entries.first)
        #expect(flensburg.district.ags == "01001")
        #expect(flensburg.district.name == "SK Flensburg")
        #expect(flensburg.incidence == 2.23453700393279)
        #expect(flensburg.stateIncidence == nil)
    }
}
