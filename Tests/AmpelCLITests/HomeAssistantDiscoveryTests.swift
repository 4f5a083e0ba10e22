import AmpelTestSupport
import Foundation
import Testing

/// Every discovery config `ampel run` retains, checked by Home Assistant's own code
/// (`scripts/ha-validate.py` in the venv that `scripts/install-deps.sh` makes): the schema of
/// each platform, and each template rendered against the daemon's real states and alerts.
/// Then the removals: `homeassistant.devices: false` and `homeassistant.discovery: false` at
/// the next start leave no config of what they no longer announce.
///
/// Without the venv the test fails with the install command; `AMPEL_SKIP_HA_VALIDATION=1`
/// skips it instead (locally only: `.ci/run` unsets it).
@Suite("Home Assistant discovery against Home Assistant's own schemas (built binary, real mosquitto)", .serialized)
struct HomeAssistantDiscoveryTests {
    static let venv = ProcessInfo.processInfo.environment["AMPEL_HA_VENV"] ?? NSHomeDirectory() + "/.cache/ampel/ha-venv-2024.3"
    static var venvReady: Bool { FileManager.default.fileExists(atPath: venv + "/.complete") }
    static var skipped: Bool { !venvReady && ProcessInfo.processInfo.environment["AMPEL_SKIP_HA_VALIDATION"] == "1" }
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/ha-validate.py").path

    typealias Record = RunCrashTests.Collector.Record

    /// What the broker retains under `topics` now: a fresh subscription
    /// gets every retained message of its filters before the retained sentinel of the last one.
    static func retained(_ broker: MosquittoBroker, topics: [String] = ["homeassistant/#", "ampel/#"]) async throws -> [Record] {
        let sentinel = "test/ha-sentinel"
        _ = try await MosquittoBroker.runTool("/usr/bin/mosquitto_pub", ["-h", broker.host, "-p", "\(broker.port)", "-q", "1", "-r",
                                                                        "-t", sentinel, "-m", "end"])
        let reader = try RunCrashTests.Collector(broker, topics: topics + [sentinel])
        defer { reader.stop() }
        try await reader.wait("the retained messages up to the sentinel") { $0.contains { $0.topic == sentinel } }
        return Array(reader.records().prefix { $0.topic != sentinel })
    }

    static func configs(_ records: [Record]) -> [String: String] {
        var configs: [String: String] = [:]
        for record in records where record.topic.hasPrefix("homeassistant/") { configs[record.topic] = record.payload }
        return configs
    }

    /// Runs the validator over `records` (as `mosquitto_sub -v` prints them).
    static func validate(_ records: [Record], in dir: URL) async throws -> (status: Int32?, output: String) {
        let dump = dir.appendingPathComponent("dump-\(UUID().uuidString).txt")
        try Data(records.map { "\($0.topic) \($0.payload)\n" }.joined().utf8).write(to: dump)
        defer { try? FileManager.default.removeItem(at: dump) }
        let (status, output) = try await ChildProcess.run(venv + "/bin/python", [script, dump.path])
        return (status.exitCode, output)
    }

    /// What `homeassistant.json` in the state directory says was announced.
    static func announced(_ state: URL) throws -> [[String: Any]] {
        let data = try Data(contentsOf: state.appendingPathComponent("homeassistant.json"))
        let object = try #require(JSONSerialization.jsonObject(with: data) as? [String: Any])
        return try #require(object["announced"] as? [[String: Any]])
    }

    @Test("every retained config passes Home Assistant 2024.3's schema and renders the real states and alerts; broken ones are rejected; switched-off entities leave no config",
          .disabled(if: skipped, "AMPEL_SKIP_HA_VALIDATION=1 and no Home Assistant venv"))
    func validAndRemoved() async throws {
        try #require(Self.venvReady, """
            Home Assistant's venv is missing at \(Self.venv): run scripts/install-deps.sh, which runs
            python3 -m venv \(Self.venv) && \(Self.venv)/bin/pip install 'homeassistant==2024.3.*' && touch \(Self.venv)/.complete
            (or set AMPEL_SKIP_HA_VALIDATION=1 to skip this test locally)
            """)
        var options = Scene.Options()
        options.topics = ["homeassistant/#", "ampel/#"]
        try await Scene.run(options) { scene in
            let (broker, dir, collector) = (scene.broker, scene.dir, scene.collector)
            try await scene.start(configuration: "devices:\n  alice:\n    name: Alice\n")

            // Two devices; bob crosses from green into red, so each phase sensor and alert event has
            // a state and an alert to render.
            try await scene.fix("alice", at: RunCrashTests.muenchen, tst: 1000)
            try await scene.fix("bob", at: RunCrashTests.altoetting, tst: 1000)
            try await scene.fix("bob", at: RunCrashTests.muenchen, tst: 1001)
            try await collector.wait("bob's alert into red and both devices' configs") { records in
                // The alert event reads the alert's copy for Home Assistant (`…/event`).
                records.contains { $0.topic == "ampel/device/bob/event" && $0.payload.contains(#""to":"red""#) }
                    && records.contains { $0.topic == "homeassistant/event/ampel/device_alice/config" }
                    && records.contains { $0.topic == "homeassistant/sensor/ampel/device_bob/config" }
            }
            let alerts = collector.records().filter { $0.topic.hasSuffix("/alert") || $0.topic.hasSuffix("/event") }
            let retained = try await Self.retained(broker)
            let configs = Self.configs(retained)
            // The bridge's 3, 3 per district of Bavaria, 2 per device.
            let districts = try rawBavarianIncidences(day: "2020-10-15").count
            let expected = 3 + districts * 3 + 2 * 2
            #expect(configs.count == expected)
            let dump = retained + alerts
            let checked = try await Self.validate(dump, in: dir)
            #expect(checked.status == 0, "\(checked.output)")
            let valid = Set(checked.output.split(separator: "\n").filter { $0.hasPrefix("ok ") }.map { String($0.dropFirst(3)) })
            #expect(valid == Set(configs.keys))

            // Each kind of entity broken once: the validator must say so.
            typealias Break = (topic: String, change: (inout [String: Any]) -> Void)
            let breaks: [Break] = [
                ("homeassistant/event/ampel/device_bob/config", { $0["value_template"] = "{{ value_json | tojson }}" }),  // no event_type
                ("homeassistant/event/ampel/district_09162/config", { $0["event_types"] = nil }),
                ("homeassistant/sensor/ampel/district_09162_incidence/config", { $0["state_class"] = "measurment" }),
                ("homeassistant/sensor/ampel/district_09162_incidence/config", { $0["value_template"] = "{{ value_json.title }}" }),
                ("homeassistant/sensor/ampel/district_09162/config", { $0["value_template"] = "{{ value_json.color }}" }),
                ("homeassistant/binary_sensor/ampel/bridge_connectivity/config", { $0["payload_on"] = "ONLINE" }),
                ("homeassistant/binary_sensor/ampel/bridge_stale/config", { $0["entity_category"] = "diagnostics" }),
                ("homeassistant/sensor/ampel/bridge_data_date/config", { $0["value_template"] = "{{ value_json.lastFetch }}" }),
                ("homeassistant/sensor/ampel/device_alice/config", { config in
                    var device = config["device"] as? [String: Any] ?? [:]
                    device["via_devices"] = device.removeValue(forKey: "via_device")
                    config["device"] = device
                }),
                ("homeassistant/sensor/ampel/device_alice/config", { $0["unit_of_measurment"] = "x" }),
            ]
            for broken in breaks {
                let original = try #require(configs[broken.topic])
                var config = try #require(JSONSerialization.jsonObject(with: Data(original.utf8)) as? [String: Any])
                broken.change(&config)
                let payload = String(decoding: try JSONSerialization.data(withJSONObject: config, options: [.sortedKeys]), as: UTF8.self)
                let result = try await Self.validate(dump.filter { $0.topic != broken.topic } + [(broken.topic, payload)], in: dir)
                let rejected = result.status == 1 && result.output.contains("REJECTED \(broken.topic)")
                #expect(rejected, "\(broken.topic) \(payload): \(result.output)")
            }

            // Devices off at the next start: their configs are removed, the rest stays valid.
            try await scene.stop()
            let first: [Bool?] = try Self.announced(scene.state).map { $0["devices"] as? Bool }
            #expect(first == [true])
            var daemon = try await scene.start(configuration: "homeassistant:\n  devices: false\n")
            try await daemon.awaitLog("the broker took the removed Home Assistant configs")
            let districtsOnly = Self.configs(try await Self.retained(broker))
            let deviceConfigs = districtsOnly.keys.filter { $0.contains("/device_") }
            #expect(deviceConfigs.isEmpty, "\(deviceConfigs)")
            let bridgeAndDistricts = 3 + districts * 3
            #expect(districtsOnly.count == bridgeAndDistricts)
            let stillValid = try await Self.validate(try await Self.retained(broker), in: dir)
            #expect(stillValid.status == 0, "\(stillValid.output)")
            try await scene.stop()
            let second: [Bool?] = try Self.announced(scene.state).map { $0["devices"] as? Bool }
            #expect(second == [false])

            // Discovery off: nothing is left.
            daemon = try await scene.start(configuration: "homeassistant:\n  discovery: false\n")
            try await daemon.awaitLog("the broker took the removed Home Assistant configs")
            let left = Self.configs(try await Self.retained(broker))
            #expect(left.isEmpty, "\(left.keys)")
            try await scene.stop()
            let last = try Self.announced(scene.state)
            #expect(last.isEmpty)
        }
    }

    @Test("under the Krankenhausampel: the states' indicator sensors pass the schema and render their reports, a missing value as unknown; a broken one is rejected; the next run under bavaria removes them",
          .disabled(if: skipped, "AMPEL_SKIP_HA_VALIDATION=1 and no Home Assistant venv"))
    func stateSensors() async throws {
        try #require(Self.venvReady, "Home Assistant's venv is missing at \(Self.venv): run scripts/install-deps.sh")
        var options = Scene.Options()
        options.topics = ["homeassistant/#", "ampel/#"]
        options.date = "2021-11-10"
        try await Scene.run(options) { scene in
            try await scene.start(configuration: "rules: krankenhausampel-2021\n")
            try await scene.collector.wait("Bavaria's report and the last state sensor's config") { records in
                records.contains { $0.topic == "ampel/states/09" }
                    && records.contains { $0.topic == "homeassistant/sensor/ampel/state_09_icu_covid_patients/config" }
            }
            let retained = try await Self.retained(scene.broker)
            let configs = Self.configs(retained)
            let stateConfigs = configs.keys.filter { $0.contains("/state_") }.sorted()
            let names = ["hospitalisation_cases_7d", "hospitalisation_incidence_7d", "icu_covid_patients"]
            #expect(Set(stateConfigs) == Set(["00", "09"].flatMap { id in names.map { "homeassistant/sensor/ampel/state_\(id)_\($0)/config" } }))
            let checked = try await Self.validate(retained, in: scene.dir)
            #expect(checked.status == 0, "\(checked.output)")
            let valid = Set(checked.output.split(separator: "\n").filter { $0.hasPrefix("ok ") }.map { String($0.dropFirst(3)) })
            #expect(Set(stateConfigs).isSubset(of: valid))
            // A template that picks the indicator's date instead of its value is no number.
            let topic = "homeassistant/sensor/ampel/state_09_icu_covid_patients/config"
            let original = try #require(configs[topic])
            var config = try #require(JSONSerialization.jsonObject(with: Data(original.utf8)) as? [String: Any])
            config["value_template"] = "{{ (value_json.indicators | selectattr('name', 'eq', 'icu_covid_patients') | first).date }}"
            let payload = String(decoding: try JSONSerialization.data(withJSONObject: config, options: [.sortedKeys]), as: UTF8.self)
            let broken = try await Self.validate(retained.filter { $0.topic != topic } + [(topic, payload)], in: scene.dir)
            #expect(broken.status == 1 && broken.output.contains("REJECTED \(topic)"), "\(broken.output)")

            // The next run under bavaria removes every state sensor and empties the reports.
            try await scene.stop()
            let daemon = try await scene.start(configuration: "rules: bavaria\n")
            try await daemon.awaitLog("the broker took the removed Home Assistant configs")
            let after = try await Self.retained(scene.broker)
            #expect(Self.configs(after).keys.filter { $0.contains("/state_") }.isEmpty)
            #expect(!after.contains { $0.topic.hasPrefix("ampel/states/") })
        }
    }
}
