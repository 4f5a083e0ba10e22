import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Testing

/// `ampel replay` on a real mosquitto (built binary): the daemon of `ampel run` on the bundled
/// history, one publication day per tick of its clock.
@Suite("ampel replay (built binary, real mosquitto)")
struct ReplayCommandTests {
    /// LK Günzburg under the Notbremse's day counts from 26 March to 15 April 2021: the phase in
    /// force changes three times (29 March, 9 and 14 April), lagging the measured one.
    static let ags = "09774"
    static let from = "2021-03-26"
    static let to = "2021-04-15"
    static let rules = "notbremse-2021"

    @Test("a district's phase follows the history day by day in order; a device parked there gets one alert per change in force")
    func replayFollowsTheHistory() async throws {
        let ruleSet = try RuleSetCatalog.bundled(Self.rules)
        let days = BundledData.shared.historyDays.filter { $0 >= Day(iso: Self.from)! && $0 <= Day(iso: Self.to)! }
        var expected: [(day: String, phase: String, measured: String?)] = []
        for day in days {
            let dataset = try BundledData.shared.history(on: day, ruleSet: ruleSet)
            let signal = try ruleSet.signal(atDistrict: Self.ags, dataset: dataset, region: .bavaria, language: .en)
            expected.append((day.iso, signal.phase, signal.measuredPhase))
        }
        var changes: [(day: String, phase: String)] = [(expected[0].day, expected[0].phase)]
        for entry in expected.dropFirst() where entry.phase != changes[changes.count - 1].phase {
            changes.append((entry.day, entry.phase))
        }
        #expect(changes.count == 4, "the chosen stretch changes in force three times: \(changes)")
        #expect(expected.contains { $0.phase != $0.measured }, "and in force differs from measured on some days")

        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let collector = try RunCrashTests.Collector(broker, topics: [
            "ampel-replay/district/\(Self.ags)/#", "ampel-replay/device/#", "ampel-replay/bridge/state", "ampel-replay/bridge/info", Scene.probeTopic,
        ])
        defer { collector.process.signal(SIGKILL) }
        // Subscribed before the replay starts: its days are a second apart, and a later subscriber
        // would find the first day's retained state replaced.
        try await collector.awaitRoute(from: broker.host, port: broker.port, topic: Scene.probeTopic)
        try await withDaemon(
            ["--broker", broker.url, "--state-dir", dir.path, "--from", Self.from, "--to", Self.to, "--day-seconds", "1",
             "--rules", Self.rules, "--log-level", "info"],
            command: "replay") { daemon in
            try await collector.awaitBridge()
            try await daemon.awaitLog("subscribed")
            // A device parked in Günzburg for the whole replay.
            try await MosquittoBroker.runTool("/usr/bin/mosquitto_pub", [
                "-h", broker.host, "-p", "\(broker.port)", "-q", "1", "-t", "ampel/location/parked",
                "-m", #"{"lat":48.4527,"lon":10.2766}"#,
            ])
            let last = Self.to
            try await collector.wait("the district's state of the last day", timeout: .seconds(120)) { records in
                records.contains { $0.topic == "ampel-replay/district/\(Self.ags)/state" && $0.payload.contains(#""dataDate":"\#(last)""#) }
            }
            try await collector.wait("bridge/info naming the replay and its last day") { records in
                records.contains { $0.topic == "ampel-replay/bridge/info" && $0.payload.contains(#""source":"replay""#)
                    && $0.payload.contains(#""dataDate":"\#(last)""#) }
            }
            let status = try await collector.stop(daemon)
            #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
            let records = collector.records()

            // Every day once, in order, each with the phase in force and the measured phase of that day.
            let states = records.filter { $0.topic == "ampel-replay/district/\(Self.ags)/state" }.map { record in
                let object = (try? JSONSerialization.jsonObject(with: Data(record.payload.utf8))) as? [String: Any] ?? [:]
                return (day: object["dataDate"] as? String ?? "?", phase: object["phase"] as? String ?? "?",
                        measured: object["measuredPhase"] as? String)
            }
            #expect(states.map(\.day) == expected.map(\.day))
            #expect(states.map(\.phase) == expected.map(\.phase))
            #expect(states.map(\.measured) == expected.map(\.measured))
            // The phase topic: the phase in force at the start, then each change, in order.
            let phases = records.filter { $0.topic == "ampel-replay/district/\(Self.ags)/phase" }.map(\.payload)
            #expect(phases == changes.map(\.phase))
            // The device: its first sighting, then one alert per change in force after it.
            let alerts = records.filter { $0.topic == "ampel-replay/device/parked/alert" }.map { record in
                let object = (try? JSONSerialization.jsonObject(with: Data(record.payload.utf8))) as? [String: Any] ?? [:]
                return (day: object["dataDate"] as? String ?? "?", from: object["from"] as? String, to: object["to"] as? String ?? "?")
            }
            let first = try #require(alerts.first, "the device's first sighting")
            #expect(first.from == nil)
            let after = changes.filter { $0.day > first.day }
            #expect(!after.isEmpty, "the device was parked before the first change (\(first.day))")
            #expect(alerts.dropFirst().map(\.to) == after.map(\.phase))
            #expect(alerts.dropFirst().map(\.day) == after.map(\.day))
        }
    }

    @Test("with a production configuration the replay leaves production's topics and session alone and calls no webhook")
    func productionUntouched() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let server = try await HTTPFixtureServer.start()
        defer { Task { try? await server.shutdown() } }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // What production holds: a retained phase and a bridge state.
        for (topic, payload) in [("ampel/district/\(Self.ags)/phase", "production"), ("ampel/bridge/state", #"{"state":"online"}"#)] {
            _ = try await MosquittoBroker.runTool("/usr/bin/mosquitto_pub", ["-h", broker.host, "-p", "\(broker.port)", "-r", "-q", "1", "-t", topic, "-m", payload])
        }
        let collector = try RunCrashTests.Collector(broker, topics: ["ampel/#", "ampel-replay/bridge/#", "ampel-replay/device/#", Scene.probeTopic])
        defer { collector.process.signal(SIGKILL) }
        try await collector.awaitRoute(from: broker.host, port: broker.port, topic: Scene.probeTopic)
        let mark = collector.mark
        let configuration = """
            mqtt:
              client_id: ampel
            notify:
              webhooks:
                - name: phone
                  url: \(server.baseURL)/hook
            alerts:
              max_fix_age: false

            """
        try await withDaemon(
            ["--broker", broker.url, "--state-dir", dir.path, "--from", Self.from, "--to", "2021-03-29", "--day-seconds", "0.5", "--log-level", "info"],
            configuration: configuration, command: "replay") { daemon in
            try await daemon.awaitLog("replay: client id ampel-replay, topics under ampel-replay/")
            try await daemon.awaitLog("subscribed")
            try await MosquittoBroker.runTool("/usr/bin/mosquitto_pub", [
                "-h", broker.host, "-p", "\(broker.port)", "-q", "1", "-t", "ampel/location/parked", "-m", #"{"lat":48.4527,"lon":10.2766}"#,
            ])
            // The device's first sighting is an alert: with webhooks on, it would be POSTed.
            try await collector.wait("the replay's alert for the parked device", since: mark) { records in
                records.contains { $0.topic == "ampel-replay/device/parked/alert" }
            }
            try await collector.wait("the replay's last day", since: mark) { records in
                records.contains { $0.topic == "ampel-replay/bridge/info" && $0.payload.contains(#""dataDate":"2021-03-29""#) }
            }
            let status = try await collector.stop(daemon)
            #expect(status.exitCode == 0, "\(daemon.stderr)")
            let production = collector.records(since: mark).filter { $0.topic.hasPrefix("ampel/") && $0.topic != "ampel/location/parked" }
            #expect(production.isEmpty, "the replay wrote to production: \(production.prefix(3))")
            #expect(!server.requests.contains { $0.method == "POST" }, "a webhook was called")
            let retained = try await MosquittoBroker.runTool("/usr/bin/mosquitto_sub", [
                "-h", broker.host, "-p", "\(broker.port)", "-t", "ampel/district/\(Self.ags)/phase", "-C", "1", "-W", "10",
            ]).trimmingCharacters(in: .newlines)
            #expect(retained == "production")
        }
    }
}
