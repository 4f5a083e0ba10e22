import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` with the default `outputs.device_state: on_change` against a real mosquitto: a
/// device that keeps moving within its district gets a state at its first fix and then only
/// on the heartbeat; a new phase and a new language publish at once; the texts topics that the
/// states name are retained.
@Suite("ampel run publishes what changed (built binary, real mosquitto)")
struct RunDeviceStateOutputTests {
    static func fix(_ broker: MosquittoBroker, _ key: String, lat: Double, lon: Double, tst: Int, lang: String? = nil) async throws {
        try await Scene.publish(broker, [Scene.message(key, at: (lat, lon), tst: tst, lang: lang)])
    }

    @Test("on_change: the first fix, then only heartbeats while the device moves in its district; a phase and a language at once")
    func onChange() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let collector = try RunCrashTests.Collector(broker, topics: ["ampel/device/#", "ampel/bridge/state"])
        defer { collector.stop() }
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.path, "--source", "snapshot",
                              "--date", "2020-10-15", "--log-level", "info"],
                             configuration: "alerts:\n  max_fix_age: false\noutputs:\n  heartbeat: 2s\n") { daemon in
            try await collector.awaitBridge()
            try await daemon.awaitLog("subscribed")

            // 40 fixes in SK München, each a little further north, one every 100 ms: the position
            // changes at every fix, nothing a consumer sees does.
            let (lat, lon) = RunCrashTests.muenchen
            let clock = ContinuousClock()
            let start = clock.now
            let moves = 40
            for index in 1...moves {
                try await Self.fix(broker, "car", lat: lat + Double(index) / 10_000, lon: lon, tst: index)
                await threadSleep(for: .milliseconds(100))  // the fleet's pace, not a wait for an event
            }
            let span = clock.now - start
            try await Self.fix(broker, "car", lat: RunCrashTests.altoetting.0, lon: RunCrashTests.altoetting.1, tst: moves + 1)
            try await Self.fix(broker, "car", lat: RunCrashTests.altoetting.0, lon: RunCrashTests.altoetting.1, tst: moves + 2, lang: "de")
            try await collector.awaitStates(["car"], tst: moves + 2)

            let states = try collector.records().filter { $0.topic == "ampel/device/car/state" }.map { record in
                try #require(JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any])
            }
            let tsts = states.compactMap { $0["tst"] as? Int }
            #expect(tsts.first == 1, "the first sighting")
            let heartbeats = tsts.filter { $0 > 1 && $0 <= moves }
            // The daemon's clock counts whole seconds: two heartbeats of 2 s are more than 1 s apart.
            let seconds = Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18
            #expect(!heartbeats.isEmpty && Double(heartbeats.count) <= seconds + 1, "\(heartbeats) over \(seconds) s")
            for state in states where (state["tst"] as? Int).map({ $0 > 1 && $0 <= moves }) == true {
                // A heartbeat carries the position of the fix it came with.
                let tst = try #require(state["tst"] as? Int)
                #expect(abs((state["lat"] as? Double ?? 0) - (lat + Double(tst) / 10_000)) < 1e-9)
                #expect(state["phase"] as? String == "red")
            }
            #expect(Array(tsts.suffix(2)) == [moves + 1, moves + 2], "a new phase, then a new language, each at once")
            #expect(states.last?["texts"] as? String == "ampel/rules/bavaria/green/de")
            #expect(collector.alerts()["car"] == ["null>red", "red>green"])

            // The texts the states name are retained: a subscriber that comes later gets all ten.
            let texts = try await MosquittoBroker.runTool("/usr/bin/mosquitto_sub",
                                                          ["-h", broker.host, "-p", "\(broker.port)", "-t", "ampel/rules/#", "-v",
                                                           "-C", "10", "-W", "30"])
            let topics = Set(texts.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) })
            #expect(topics == Set(["green", "yellow", "red", "darkred", "outside"].flatMap { ["ampel/rules/bavaria/\($0)/de", "ampel/rules/bavaria/\($0)/en"] }))
            #expect(texts.split(separator: "\n").allSatisfy { $0.contains(#""title":""#) && $0.contains(#""rules":["#) })

            let status = try await collector.stop(daemon)
            #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        }
    }

    @Test("a restart in another language or rule set brings parked devices' retained states into it and empties the old texts topics")
    func restartInAnotherShape() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let arguments = ["--broker", broker.url, "--state-dir", dir.path, "--source", "snapshot", "--date", "2020-10-15", "--log-level", "info"]
        let parked = ["p1", "p2"]
        let stateTopics = Set(parked.map { "ampel/device/\($0)/state" })
        /// Until each parked device's state since `mark` has `key` equal to `value`.
        func awaitParked(_ collector: RunCrashTests.Collector, since mark: Int, _ key: String, _ value: String) async throws {
            try await collector.wait("the parked devices' states with \(key) \(value)", since: mark) { records in
                stateTopics.allSatisfy { topic in
                    records.contains { $0.topic == topic && (RunCrashTests.Collector.field(key, $0.payload) as? String) == value }
                }
            }
        }

        // First run, in English: two devices report once and then stay silent.
        let collector = try RunCrashTests.Collector(broker, topics: ["ampel/device/#", "ampel/bridge/state"])
        defer { collector.stop() }
        try await withDaemon(arguments) { first in
            try await collector.awaitBridge()
            try await first.awaitLog("subscribed")
            try await Scene.publish(broker, parked.map { Scene.message($0, at: RunCrashTests.muenchen, tst: 100) })
            try await collector.awaitStates(parked, tst: 100)
            try await first.awaitLog("recorded the shape of the published device states")
            #expect(try await collector.stop(first).exitCode == 0)
        }

        // In German: the parked devices' states follow without a fix.
        var mark = collector.mark
        try await withDaemon(arguments, configuration: DaemonProcess.replayConfiguration + "lang: de\n") { german in
            try await awaitParked(collector, since: mark, "lang", "de")
            try await german.awaitLog("recorded the shape of the published device states")
            #expect(try await collector.stop(german).exitCode == 0)
        }

        // Under another rule set: the states name it, and only its texts topics are retained.
        mark = collector.mark
        try await withDaemon(arguments + ["--rules", "bavaria-initial"],
                             configuration: DaemonProcess.replayConfiguration + "lang: de\n") { initial in
            try await awaitParked(collector, since: mark, "ruleSet", "bavaria-initial")
            try await initial.awaitLog("recorded the shape of the published device states")
            let retained = try await HomeAssistantDiscoveryTests.retained(broker, topics: ["ampel/rules/#", "ampel/device/#"])
            let texts = Set(retained.map(\.topic).filter { $0.hasPrefix("ampel/rules/") })
            #expect(!texts.isEmpty && texts.allSatisfy { $0.hasPrefix("ampel/rules/bavaria-initial/") }, "\(texts.sorted())")
            #expect(stateTopics.isSubset(of: Set(retained.map(\.topic))), "both parked devices' states are retained")
            for record in retained where stateTopics.contains(record.topic) {
                let phase = RunCrashTests.Collector.field("phase", record.payload) as? String ?? "?"
                #expect(RunCrashTests.Collector.field("texts", record.payload) as? String == "ampel/rules/bavaria-initial/\(phase)/de")
            }
            #expect(try await collector.stop(initial).exitCode == 0)
        }
    }
}
