import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` on RabbitMQ's MQTT plugin (Debian `rabbitmq-server` 3.10, MQTT 3.1.1), set up as
/// docs/deploy.md's recipe says: a vhost for MQTT, the daemon's own user with the recipe's
/// permissions, `mqtt.protocol: "3.1.1"`. Built binary, a real node started by the test.
@Suite("ampel run on RabbitMQ's MQTT plugin (built binary, Debian rabbitmq-server)", .serialized, .timeLimit(.minutes(6)))
struct RunRabbitMQTests {
    typealias Collector = Scene.Collector

    /// The daemon's broker user and, as docs/deploy.md gives them, its permissions on the MQTT
    /// vhost for client id `ampel`: the plugin publishes to the exchange `amq.topic` and keeps
    /// a subscriber's session in the queues `mqtt-subscription-<client id>qos0` and `qos1`.
    static let user = "ampel"
    static let password = "ampel-daemon-secret"
    static let configure = #"^mqtt-subscription-ampelqos[01]$"#
    static let writeAndRead = #"^(amq\.topic|mqtt-subscription-ampelqos[01])$"#

    /// The daemon's configuration on RabbitMQ (the test's fixes carry fixed old `tst`s).
    static let configuration = """
        mqtt:
          protocol: "3.1.1"
          username: \(user)
        alerts:
          max_fix_age: false

        """

    /// The retained message of each of `topics` (exact topics: RabbitMQ 3.10 sends retained
    /// messages to exact subscriptions only), read with the tools' user. Returns once one per
    /// topic has come, or after 20 s with what came: a missing one fails the expectation that
    /// names it rather than the read.
    static func retained(_ broker: RabbitMQBroker, _ topics: [String]) async throws -> [String: String] {
        let (status, output) = try await ChildProcess.run(
            "/usr/bin/mosquitto_sub",
            broker.toolOptions + ["-h", broker.host, "-p", "\(broker.mqttPort)", "-v", "--retained-only",
                                  "-C", "\(topics.count)", "-W", "20"] + topics.flatMap { ["-t", $0] })
        // 27: mosquitto_sub's -W ran out.
        try #require(status.exitCode == 0 || status.exitCode == 27, "mosquitto_sub: \(status)\n\(output)")
        let records = Scene.records(verbose: output).filter { topics.contains($0.topic) }
        return Dictionary(records.map { ($0.topic, $0.payload) }) { _, newer in newer }
    }

    @Test(
        "RabbitMQ 3.10 with the recipe: states, alerts and retained district phases; QoS 1 fixes sent while the daemon is stopped wait in its session and are handled after the restart; the Last Will is retained",
        .enabled(if: RabbitMQBroker.isInstalled, "rabbitmq-server is not installed (scripts/install-deps.sh installs it): RabbitMQ test skipped"))
    func recipeEndToEnd() async throws {
        let began = ContinuousClock.now
        let broker = try await RabbitMQBroker.start()
        let startup = ContinuousClock.now - began
        var stopped = false
        defer { if !stopped { broker.stop() } }
        let version = RabbitMQBroker.installedVersion ?? "?"
        // The recipe's user: the daemon gets no more than it needs.
        try await broker.rabbitmqctl(["add_user", Self.user, Self.password])
        try await broker.rabbitmqctl(["set_permissions", "-p", broker.vhost, Self.user, Self.configure, Self.writeAndRead, Self.writeAndRead])
        let configured = ContinuousClock.now - began

        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let tools = broker.toolOptions
        // Subscribed before the daemon starts: alerts are not retained.
        let collector = try Collector(host: broker.host, port: broker.mqttPort, options: tools,
                                      topics: ["ampel/device/#", "ampel/bridge/state", "ampel/bridge/info", Scene.probeTopic])
        defer { collector.stop() }
        try await collector.awaitRoute(from: broker.host, port: broker.mqttPort, options: tools, topic: Scene.probeTopic)

        let arguments = ["--broker", broker.url, "--state-dir", dir.path, "--source", "snapshot", "--date", "2020-10-15", "--log-level", "info"]
        let environment = ["AMPEL_MQTT_PASSWORD": Self.password]
        /// `body` with a daemon on RabbitMQ that is online and subscribed.
        func withOnlineDaemon<T>(_ body: (DaemonProcess) async throws -> T) async throws -> T {
            let mark = collector.mark
            return try await withDaemon(arguments, environment: environment, configuration: Self.configuration) { daemon in
                do {
                    try await collector.wait("ampel run online on RabbitMQ", since: mark, timeout: .seconds(60)) { records in
                        records.contains { $0.topic == "ampel/bridge/state" && $0.payload.contains("online") }
                    }
                    try await daemon.awaitLog("subscribed")
                } catch {
                    Issue.record("\(error)\n--- ampel run\n\(daemon.stderr)\n--- rabbitmq\n\(broker.logText.suffix(3000))")
                    throw error
                }
                return try await body(daemon)
            }
        }

        // Without `mqtt.protocol: "3.1.1"`: RabbitMQ 3.10 cannot parse the MQTT 5 CONNECT and
        // closes the connection without a CONNACK. The daemon retries (a drop before the CONNACK
        // has other causes too) and its log says what to set.
        try await withDaemon(arguments, environment: environment,
                             configuration: Self.configuration.replacingOccurrences(of: "  protocol: \"3.1.1\"\n", with: "")) { asV5 in
            do {
                try await asV5.awaitLog(#"cannot connect to the broker; retrying"#, timeout: .seconds(30))
            } catch {
                Issue.record("\(error)\n\(asV5.stderr)")
            }
            #expect(asV5.stderr.contains(#"speaks only MQTT 3.1.1, such as RabbitMQ before 3.13, does this; then set mqtt.protocol: "3.1.1""#),
                    "\(asV5.stderr)")
            _ = try await asV5.kill()
        }

        let keys = (0..<10).map { "dev\($0)" }
        let firstLog = try await withOnlineDaemon { daemon in
            #expect(daemon.stderr.contains("MQTT 3.1.1: alerts go without message expiry"), "the start says what 3.1.1 lacks")
            try await RunCrashTests.send(host: broker.host, port: broker.mqttPort, options: tools, keys.map { ($0, RunCrashTests.muenchen) }, tst: 100)
            try await collector.awaitStates(keys, tst: 100)

            // Retained: the district phases (a lamp's and Home Assistant's exact topics), a state, the bridge.
            let first = try await Self.retained(broker, [
                "ampel/district/09162/phase", "ampel/district/09171/phase", "ampel/device/dev0/state", "ampel/bridge/state",
            ])
            #expect(first["ampel/district/09162/phase"] == "red", "\(first)")
            #expect(first["ampel/district/09171/phase"] == "green", "\(first)")
            #expect(first["ampel/device/dev0/state"]?.contains(#""tst":100"#) == true, "\(first)")
            #expect(first["ampel/bridge/state"]?.contains("online") == true, "\(first)")

            // Stopped; QoS 1 fixes arrive, each acknowledged by RabbitMQ, and wait in the daemon's
            // session: its durable queue, which a clean-session-false 3.1.1 client keeps.
            let status = try await collector.stop(daemon)
            #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
            return daemon.stderr
        }
        try await RunCrashTests.send(host: broker.host, port: broker.mqttPort, options: tools, keys.map { ($0, RunCrashTests.altoetting) }, tst: 200)
        let queues = try await broker.rabbitmqctl(["list_queues", "-p", broker.vhost, "name", "messages"])
        let sessionQueue = queues.split(separator: "\n").first { $0.hasPrefix("mqtt-subscription-ampelqos1") }
        #expect(sessionQueue.map { $0.split(whereSeparator: \.isWhitespace).last == "\(keys.count)" } == true,
                "the \(keys.count) fixes wait in the daemon's session queue: \(queues)")

        let restartMark = collector.mark
        try await withOnlineDaemon { daemon in
            do {
                try await collector.awaitStates(keys, tst: 200)
            } catch {
                Issue.record("\(error): \(collector.latest)\n--- first run\n\(firstLog)\n--- second run\n\(daemon.stderr)")
                throw error
            }
            // Handled by the restart: the states of tst 200 came after its online.
            let handledAfter = collector.records(since: restartMark).filter { $0.topic.hasSuffix("/state") && $0.payload.contains(#""tst":200"#) }
            #expect(Set(handledAfter.map(\.topic)) == Set(keys.map { "ampel/device/\($0)/state" }))
            let later = try await Self.retained(broker, ["ampel/district/09162/phase", "ampel/device/dev0/state"])
            #expect(later["ampel/district/09162/phase"] == "red", "\(later)")
            #expect(later["ampel/device/dev0/state"].map { $0.contains(#""tst":200"#) && $0.contains(#""phase":"green""#) } == true, "\(later)")

            // kill -9: RabbitMQ publishes the Last Will, and keeps it as the retained bridge state.
            let killMark = collector.mark
            let killed = try await daemon.kill()
            #expect(killed.signal == SIGKILL)
            try await collector.awaitOffline(since: killMark)
        }
        let will = try await Self.retained(broker, ["ampel/bridge/state"])
        #expect(will["ampel/bridge/state"]?.contains("offline") == true, "the Will is retained: \(will)")

        // Every alert once, in order, over the restart: first sighting, then the move made while it was stopped.
        let alerts = collector.alerts()
        for key in keys {
            #expect(alerts[key] == ["null>red", "red>green"], "\(key): \(alerts[key] ?? [])")
        }
        // A wildcard subscriber gets no retained message from RabbitMQ 3.10: the plugin looks a
        // subscription's filter up as one topic in its store. The recipe says so (and which
        // clients it hits); should a newer RabbitMQ send them, this tells to update it.
        let (_, wildcard) = try await ChildProcess.run(
            "/usr/bin/mosquitto_sub", tools + ["-h", broker.host, "-p", "\(broker.mqttPort)", "-t", "ampel/district/+/phase", "--retained-only", "-v", "-W", "3"])
        let wildcardCount = Scene.records(verbose: wildcard).filter { $0.topic.hasPrefix("ampel/district/") }.count
        #expect(wildcardCount == 0, "RabbitMQ \(version) sends retained messages to a wildcard subscription: docs/deploy.md's limit is gone")

        stopped = true
        let leftovers = await broker.stopAndWait()
        #expect(leftovers.isEmpty, "processes of the RabbitMQ node still running: \(leftovers)")
        print("""
            RabbitMQ \(version): node up in \(startup), user set in \(configured - startup), test \(ContinuousClock.now - began) \
            in all; a wildcard subscription got \(wildcardCount) retained district phases
            """)
    }
}
