import AmpelMessages
import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` with `notify.webhooks` against a real mosquitto and a loopback HTTP server:
/// each alert POSTed once, also after a failure; a hanging endpoint never holds up the MQTT
/// alerts; what a stop does with what is still queued.
@Suite("ampel run posts alerts to webhooks (built binary, real mosquitto, loopback HTTP)", .serialized)
struct RunWebhookTests {
    typealias Collector = RunCrashTests.Collector

    /// A scene with a loopback HTTP server and one webhook `hook` on it; `extra` goes into
    /// the webhook's entry.
    static func options(extra: String = "", topics: [String] = ["ampel/device/+/alert", "ampel/bridge/state", "ampel/bridge/info"]) -> Scene.Options {
        var options = Scene.Options()
        (options.http, options.topics) = (true, topics)
        options.configuration = """
        notify:
          webhooks:
            - name: hook
              url: {http}/hook
        \(extra)
        """
        return options
    }

    static func alerts(_ records: ArraySlice<Collector.Record>) -> Int {
        records.filter { $0.topic.hasSuffix("/alert") }.count
    }

    /// The `counters.webhooks.hook` of a `bridge/info` payload.
    static func counters(info payload: String) -> [String: Any]? {
        let counters = Collector.field("counters", payload) as? [String: Any]
        return (counters?["webhooks"] as? [String: Any])?["hook"] as? [String: Any]
    }

    /// The `counters.webhooks.hook` of the last `bridge/info` seen.
    static func counters(_ collector: Collector) throws -> [String: Any] {
        let info = try #require(collector.records().last { $0.topic == "ampel/bridge/info" })
        return try #require(counters(info: info.payload), "\(info.payload)")
    }

    @Test("the endpoint answers 500 first: each alert arrives in exactly one delivered POST, in the webhook's language")
    func exactlyOnceAfterAFailure() async throws {
        try await Scene.run(Self.options(extra: "      language: de")) { scene in
            let (server, collector) = (try #require(scene.server), scene.collector)
            server.inject(.status(500))
            try await scene.start()
            let keys = (0..<10).map { "dev\($0)" }
            try await scene.round(keys: keys, at: RunCrashTests.muenchen, tst: 100)
            try await withTimeout(.seconds(60), "\(keys.count) delivered POSTs") { await server.waitForDelivered(keys.count) }
            // The daemon counts a POST once it has read the answer: its next bridge/info says so.
            try await collector.wait("bridge/info with \(keys.count) delivered", timeout: .seconds(30)) { records in
                records.contains { $0.topic == "ampel/bridge/info" && Self.counters(info: $0.payload)?["delivered"] as? Int == keys.count }
            }
            try await scene.stop()
            try await scene.shutdownServer()

            #expect(Self.alerts(collector.records()[...]) == keys.count)
            let delivered = server.delivered
            #expect(delivered.count == keys.count)
            #expect(server.requestCount == keys.count + 1, "one retry, no repeat")
            #expect(Set(delivered.compactMap { $0.headers["idempotency-key"] }).count == keys.count)
            var devices: [String] = []
            for post in delivered {
                let body = try #require(try JSONSerialization.jsonObject(with: Data(post.body)) as? [String: Any])
                #expect(body["lang"] as? String == "de" && (body["title"] as? String)?.hasPrefix("Rot") == true, "\(body)")
                #expect(body["to"] as? String == "red" && body["priority"] as? Int == 7)
                devices.append(body["device"] as? String ?? "?")
            }
            #expect(devices.sorted() == keys.sorted())
            let counters = try Self.counters(collector)
            #expect(counters["delivered"] as? Int == keys.count && counters["failedAttempts"] as? Int == 1, "\(counters)")
        }
    }

    @Test("the endpoint hangs: every alert still arrives on MQTT at once; the stop ends within its limit and says what it lost")
    func hangingEndpoint() async throws {
        try await Scene.run(Self.options()) { scene in
            let (server, collector) = (try #require(scene.server), scene.collector)
            server.inject(.stall, times: 100_000)
            let daemon = try await scene.start()
            let devices = 40
            let keys = (0..<devices).map { "dev\($0)" }
            var took: [Duration] = []
            var firstRequest: ContinuousClock.Instant?
            for (round, place) in [RunCrashTests.muenchen, RunCrashTests.altoetting].enumerated() {
                let mark = collector.mark
                let started = ContinuousClock.now
                try await scene.round(keys: keys, at: place, tst: 100 + round)
                try await collector.wait("\(devices) alerts on MQTT", since: mark, timeout: .seconds(30)) { Self.alerts($0) >= devices }
                took.append(ContinuousClock.now - started)
                if firstRequest == nil {
                    try await withTimeout(.seconds(30), "the first POST") { await server.waitForRequests(1) }
                    firstRequest = .now
                }
            }
            // Every POST hangs until its timeout (10 s); the rest waits behind it, one at a time: at
            // most one more attempt per 10 s since the first, however slow the rounds were. The
            // test notices the first POST after it came (2 s for that on a loaded machine).
            let hung = ContinuousClock.now - (firstRequest ?? .now)
            let attempts = 1 + Int((hung + .seconds(2)) / .seconds(10))
            #expect(server.requestCount <= attempts, "\(server.requestCount) POSTs in \(hung)")
            // The stop on the daemon's clock: from the signal to its reaping, not the wait for its offline.
            let signalled = ContinuousClock.now
            try await scene.stop()
            let stop = (daemon.exitedAt ?? .now) - signalled
            try await scene.shutdownServer()
            print("hanging webhook: \(devices) alerts per round on MQTT in \(took); stop took \(stop)")
            #expect(daemon.stderr.contains("webhook alerts not delivered by the stop's limit are lost"), "\(daemon.stderr)")
            #expect(daemon.stderr.contains("undelivered=hook: \(2 * devices)"), "\(daemon.stderr)")
            // The stop's limits (docs/DESIGN.md, decision 45): a webhook that hangs holds no step.
            try Scene.expectStopWithinLimits(daemon.stderr, took: stop, webhooks: true)
            let counters = try Self.counters(collector)
            #expect(counters["delivered"] as? Int == 0, "\(counters)")
        }
    }

    /// A scene whose webhook's every POST fails (503) until the test clears the fault, after
    /// `devices` devices each crossed into a phase: every alert is on MQTT, the first POST was
    /// tried, and none was delivered: it and the rest wait for a retry that cannot succeed
    /// before the test says so.
    static func retryScene(devices: Int, _ body: (Scene, HTTPFixtureServer) async throws -> Void) async throws {
        try await Scene.run(options(topics: ["ampel/device/+/alert", "ampel/bridge/state"])) { scene in
            let server = try #require(scene.server)
            server.inject(.status(503), times: 100_000)
            try await scene.start()
            try await scene.round(keys: (0..<devices).map { "dev\($0)" }, at: RunCrashTests.muenchen, tst: 100)
            try await scene.collector.wait("\(devices) alerts on MQTT", timeout: .seconds(30)) { alerts($0) >= devices }
            try await withTimeout(.seconds(30), "the first POST") { await server.waitForRequests(1) }
            try #require(server.delivered.isEmpty, "nothing delivered while the endpoint answers 503")
            try await body(scene, server)
        }
    }

    @Test("kill -9 while alerts wait for a retry: they are lost, and the restart sends only new alerts (nothing twice)")
    func killLosesTheQueue() async throws {
        let devices = 10
        try await Self.retryScene(devices: devices) { scene, server in
            try await scene.kill()
            // The endpoint works again for the restart: what it still sent of the old queue would show.
            server.clearFaults()
            let lost = devices - server.delivered.count
            #expect(lost == devices, "the queue waited for a retry when the daemon was killed")
            try await scene.start()
            // One new crossing after the restart.
            try await scene.fix("dev0", at: RunCrashTests.altoetting, tst: 200)
            try await withTimeout(.seconds(30), "the new alert's POST") { await server.waitForDelivered(1) }
            try await scene.stop()
            try await scene.shutdownServer()
            print("kill -9 with \(lost) of \(devices) webhook alerts undelivered: the restart delivered \(server.delivered.count - 1) of them")
            let bodies = try server.delivered.map { try #require(try JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any]) }
            #expect(bodies.map { "\($0["device"] ?? "?") \($0["from"] ?? "?")>\($0["to"] ?? "?")" } == ["dev0 red>green"])
        }
    }

    @Test("SIGTERM while alerts wait for a retry: the stop delivers them before it exits")
    func stopDrainsTheQueue() async throws {
        let devices = 20
        try await Self.retryScene(devices: devices) { scene, server in
            // The endpoint works again just before the signal: what is delivered, the stop delivered
            // (or its retry, already due, that the stop waits for).
            server.clearFaults()
            let queuedAtStop = devices - server.delivered.count
            try await scene.stop()
            try await scene.shutdownServer()
            let stderr = scene.daemon?.stderr ?? ""
            print("SIGTERM with \(queuedAtStop) webhook alerts undelivered: \(server.delivered.count) of \(devices) delivered by the exit")
            #expect(queuedAtStop == devices, "every alert still queued at the signal")
            #expect(server.delivered.count == devices, "\(stderr)")
            #expect(!stderr.contains("not delivered by the stop's limit"))
        }
    }
}
