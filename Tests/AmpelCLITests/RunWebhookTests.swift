import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` with `notify.webhooks` against a real mosquitto and a loopback HTTP server:
/// each alert POSTed once, also after a failure; a hanging endpoint never holds up the MQTT
/// alerts; what a stop does with what is still queued.
@Suite("ampel run posts alerts to webhooks (built binary, real mosquitto, loopback HTTP)", .serialized)
struct RunWebhookTests {
    typealias Collector = RunCrashTests.Collector

    /// A state directory with a config naming one webhook, and the daemon started on it.
    /// Beside the tests' `max_fix_age: false` (their fixes carry fixed old times).
    static func start(_ broker: MosquittoBroker, _ dir: URL, webhook url: String, extra: String = "") throws -> RunRecoveryTests.Daemon {
        let yaml = """
        notify:
          webhooks:
            - name: hook
              url: \(url)
        \(extra)
        """
        return try RunRecoveryTests.Daemon(["--broker", broker.url, "--state-dir", dir.appendingPathComponent("state").path,
                                            "--source", "snapshot", "--date", "2020-10-15", "--log-level", "info"],
                                           configuration: RunRecoveryTests.Daemon.replayConfiguration + yaml)
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
        let server = try await HTTPFixtureServer.start()
        server.inject(.status(500))
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let collector = try Collector(broker, topics: ["ampel/device/+/alert", "ampel/bridge/state", "ampel/bridge/info"])
        defer { collector.stop() }
        let daemon = try Self.start(broker, dir, webhook: server.baseURL + "/hook", extra: "      language: de")
        try await collector.awaitBridge()
        try await daemon.awaitLog("subscribed")
        let keys = (0..<10).map { "dev\($0)" }
        try await RunCrashTests.round(broker, devices: keys.count, tst: 100, at: RunCrashTests.muenchen)
        try await withTimeout(.seconds(60), "10 delivered POSTs") { await server.waitForDelivered(keys.count) }
        // The daemon counts a POST once it has read the answer: its next bridge/info says so.
        try await collector.wait("bridge/info with \(keys.count) delivered", timeout: .seconds(30)) { records in
            records.contains { $0.topic == "ampel/bridge/info" && Self.counters(info: $0.payload)?["delivered"] as? Int == keys.count }
        }
        let status = try await collector.stop(daemon)
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        try await server.shutdown()

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

    @Test("the endpoint hangs: every alert still arrives on MQTT at once; the stop ends within its limit and says what it lost")
    func hangingEndpoint() async throws {
        let server = try await HTTPFixtureServer.start()
        server.inject(.stall, times: 100_000)
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let collector = try Collector(broker, topics: ["ampel/device/+/alert", "ampel/bridge/state", "ampel/bridge/info"])
        defer { collector.stop() }
        let daemon = try Self.start(broker, dir, webhook: server.baseURL + "/hook")
        try await collector.awaitBridge()
        try await daemon.awaitLog("subscribed")
        let devices = 40
        var took: [Duration] = []
        var firstRequest: ContinuousClock.Instant?
        for (round, place) in [RunCrashTests.muenchen, RunCrashTests.altoetting].enumerated() {
            let mark = collector.mark
            let started = ContinuousClock.now
            try await RunCrashTests.round(broker, devices: devices, tst: 100 + round, at: place)
            try await collector.wait("\(devices) alerts on MQTT", since: mark, timeout: .seconds(30)) { Self.alerts($0) >= devices }
            took.append(ContinuousClock.now - started)
            if firstRequest == nil {
                try await withTimeout(.seconds(30), "the first POST") { await server.waitForRequests(1) }
                firstRequest = .now
            }
        }
        // Every POST hangs until its timeout (10 s); the rest waits behind it, one at a time: at
        // most one more attempt per 10 s since the first, however slow the rounds were.
        let hung = ContinuousClock.now - (firstRequest ?? .now)
        let attempts = 1 + Int(hung / .seconds(10))
        #expect(server.requestCount <= attempts, "\(server.requestCount) POSTs in \(hung)")
        // The stop on the daemon's clock: from the signal to its reaping, not the wait for its offline.
        let signalled = ContinuousClock.now
        let status = try await collector.stop(daemon)
        let stop = (daemon.exitedAt ?? .now) - signalled
        try await server.shutdown()
        print("hanging webhook: \(devices) alerts per round on MQTT in \(took); stop took \(stop)")
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        #expect(daemon.stderr.contains("webhook alerts not delivered by the stop's limit are lost"), "\(daemon.stderr)")
        #expect(daemon.stderr.contains("undelivered=hook: \(2 * devices)"), "\(daemon.stderr)")
        // The stop's limits (docs/DESIGN.md, decision 27), as RunStopUnderLoadTests checks them.
        #expect(stop < .milliseconds(6500), "the stop took \(stop): over the stop's limits")
        let counters = try Self.counters(collector)
        #expect(counters["delivered"] as? Int == 0, "\(counters)")
    }

    /// A daemon with one webhook whose every POST fails (503) until the test clears the fault,
    /// after `devices` devices each crossed into a phase: every alert is on MQTT, the first POST
    /// was tried, and none was delivered: it and the rest wait for a retry that cannot succeed
    /// before the test says so. Broker, directory and collector go with it.
    final class RetryScene {
        let server: HTTPFixtureServer
        let broker: MosquittoBroker
        let dir: URL
        let collector: Collector
        let daemon: RunRecoveryTests.Daemon

        private init(server: HTTPFixtureServer, broker: MosquittoBroker, dir: URL, collector: Collector, daemon: RunRecoveryTests.Daemon) {
            (self.server, self.broker, self.dir, self.collector, self.daemon) = (server, broker, dir, collector, daemon)
        }

        static func start(devices: Int) async throws -> RetryScene {
            let server = try await HTTPFixtureServer.start()
            server.inject(.status(503), times: 100_000)
            let broker = try await MosquittoBroker.start()
            let dir = try temporaryDirectory()
            let collector = try Collector(broker, topics: ["ampel/device/+/alert", "ampel/bridge/state"])
            let scene = RetryScene(server: server, broker: broker, dir: dir, collector: collector,
                                   daemon: try RunWebhookTests.start(broker, dir, webhook: server.baseURL + "/hook"))
            try await collector.awaitBridge()
            try await scene.daemon.awaitLog("subscribed")
            try await RunCrashTests.round(broker, devices: devices, tst: 100, at: RunCrashTests.muenchen)
            try await collector.wait("\(devices) alerts on MQTT", timeout: .seconds(30)) { RunWebhookTests.alerts($0) >= devices }
            await server.waitForRequests(1)
            try #require(server.delivered.isEmpty, "nothing delivered while the endpoint answers 503")
            return scene
        }

        deinit {
            collector.stop()
            try? FileManager.default.removeItem(at: dir)
            broker.stop()
        }
    }

    @Test("kill -9 while alerts wait for a retry: they are lost, and the restart sends only new alerts (nothing twice)")
    func killLosesTheQueue() async throws {
        let devices = 10
        let scene = try await RetryScene.start(devices: devices)
        let (server, broker, dir, collector) = (scene.server, scene.broker, scene.dir, scene.collector)
        // Its broker and directory until the end of the test, not the last use of `scene`.
        defer { withExtendedLifetime(scene) {} }
        var daemon = scene.daemon
        daemon.process.signal(SIGKILL)
        let killed = try await daemon.exit()
        #expect(killed.signal == SIGKILL, "\(killed)")
        // The endpoint works again for the restart: what it still sent of the old queue would show.
        server.clearFaults()
        let lost = devices - server.delivered.count
        #expect(lost == devices, "the queue waited for a retry when the daemon was killed")
        daemon = try Self.start(broker, dir, webhook: server.baseURL + "/hook")
        try await daemon.awaitLog("subscribed")
        // One new crossing after the restart.
        try await RunCrashTests.send(broker, [("dev0", RunCrashTests.altoetting)], tst: 200)
        try await withTimeout(.seconds(30), "the new alert's POST") { await server.waitForDelivered(1) }
        let status = try await collector.stop(daemon)
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        try await server.shutdown()
        print("kill -9 with \(lost) of \(devices) webhook alerts undelivered: the restart delivered \(server.delivered.count - 1) of them")
        let bodies = try server.delivered.map { try #require(try JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any]) }
        #expect(bodies.map { "\($0["device"] ?? "?") \($0["from"] ?? "?")>\($0["to"] ?? "?")" } == ["dev0 red>green"])
    }

    @Test("SIGTERM while alerts wait for a retry: the stop delivers them before it exits")
    func stopDrainsTheQueue() async throws {
        let devices = 20
        let scene = try await RetryScene.start(devices: devices)
        let (server, collector, daemon) = (scene.server, scene.collector, scene.daemon)
        // Its broker and directory until the end of the test, not the last use of `scene`.
        defer { withExtendedLifetime(scene) {} }
        // The endpoint works again just before the signal: what is delivered, the stop delivered
        // (or its retry, already due, that the stop waits for).
        server.clearFaults()
        let queuedAtStop = devices - server.delivered.count
        let status = try await collector.stop(daemon)
        try await server.shutdown()
        print("SIGTERM with \(queuedAtStop) webhook alerts undelivered: \(server.delivered.count) of \(devices) delivered by the exit")
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        #expect(queuedAtStop == devices, "every alert still queued at the signal")
        #expect(server.delivered.count == devices, "\(daemon.stderr)")
        #expect(!daemon.stderr.contains("not delivered by the stop's limit"))
    }
}
