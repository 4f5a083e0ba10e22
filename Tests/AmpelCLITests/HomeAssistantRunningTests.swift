import AmpelTestSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// Ampel seen by a real, running Home Assistant 2024.3 (the venv `scripts/install-deps.sh`
/// makes) on a real mosquitto, both on free loopback ports, read through Home Assistant's REST
/// API as a user's dashboard would show it: the entities MQTT discovery creates, their states,
/// the event a device's phase change records, what a killed daemon leaves (the Last Will makes
/// them unavailable) and what a restart brings back; and Home Assistant's log has no complaint
/// about Ampel's configs. `HomeAssistantDiscoveryTests` checks the configs against the schemas;
/// this one checks that Home Assistant does with them what docs/homeassistant.md says.
///
/// Without the venv the test fails with the install command; `AMPEL_SKIP_HA=1` skips it
/// (locally only: `.ci/run` unsets it).
@Suite("A running Home Assistant shows Ampel's entities (built binary, real mosquitto, hass from the venvs)", .serialized)
struct HomeAssistantRunningTests {
    /// A Home Assistant release to run, from its venv (`scripts/install-deps.sh` makes both).
    struct Release: Sendable, CustomTestStringConvertible {
        let version: String
        let venv: String
        /// Why this release cannot run here (no Python 3.13 for its venv), or nil.
        var unavailable: String?
        /// `homeassistant.discovery` at the first start, and at the restart after the kill.
        var form = "entity"
        var restartForm = "entity"
        var testDescription: String {
            "Home Assistant \(version), discovery \(form)" + (restartForm == form ? "" : ", then \(restartForm) after the restart")
        }
        /// `.complete-running` is written by scripts/install-deps.sh once the packages Home
        /// Assistant needs to run (beyond its schemas) are in the venv.
        var venvReady: Bool { FileManager.default.fileExists(atPath: venv + "/.complete-running") }
    }

    static let releases: [Release] = {
        let environment = ProcessInfo.processInfo.environment
        let newVenv = environment["AMPEL_HA_VENV_2025"] ?? NSHomeDirectory() + "/.cache/ampel/ha-venv-2025.4.4"
        let python313 = environment["AMPEL_PYTHON313"] ?? "/root/.pyenv/versions/3.13.0/bin/python3"
        let noPython = FileManager.default.fileExists(atPath: newVenv + "/.complete-running") || FileManager.default.isExecutableFile(atPath: python313)
            ? nil : "no Python 3.13 at \(python313) to make Home Assistant 2025.4.4's venv (set AMPEL_PYTHON313)"
        return [Release(version: "2024.3", venv: HomeAssistantDiscoveryTests.venv),
                Release(version: "2025.4.4", venv: newVenv, unavailable: noPython),
                Release(version: "2025.4.4", venv: newVenv, unavailable: noPython, form: "device", restartForm: "device"),
                Release(version: "2025.4.4", venv: newVenv, unavailable: noPython, form: "entity", restartForm: "device")]
    }()
    static var skipped: Bool { ProcessInfo.processInfo.environment["AMPEL_SKIP_HA"] == "1" }

    static let augsburg = (48.3705, 10.8978)  // 09761, SK Augsburg
    static let muenchen = (48.137, 11.575)    // 09162, SK München

    @Test("München's phase and incidence sensors show the retained values, an OwnTracks device's first sighting and its move to Augsburg are events, its phase follows it, the bridge is connected; kill -9 makes every entity unavailable, a restart brings them back; no complaint in Home Assistant's log",
          .disabled(if: skipped, "AMPEL_SKIP_HA=1: the test with a running Home Assistant is skipped"),
          .timeLimit(.minutes(3)), arguments: releases)
    func entitiesFollowTheDaemon(_ release: Release) async throws {
        // Reported as cancelled (not passed) where this machine cannot make the venv.
        if let unavailable = release.unavailable {
            print("HomeAssistantRunningTests: \(release.version) cancelled: \(unavailable)")
            try Test.cancel("\(release.version): \(unavailable)")
        }
        try #require(release.venvReady, """
            Home Assistant \(release.version) cannot run from \(release.venv): run scripts/install-deps.sh, which installs
            homeassistant==\(release.version) and the packages its MQTT and default integrations load into that venv
            and writes \(release.venv)/.complete-running (or set AMPEL_SKIP_HA=1 to skip this test locally)
            """)
        let began = ContinuousClock.now
        var options = Scene.Options()
        // The discovery configs, to read the device's unique ids from what the daemon announced.
        options.topics = ["ampel/device/#", "ampel/district/#", "ampel/bridge/state", "homeassistant/+/ampel/+/config"]
        try await Scene.run(options) { scene in
            let home = try HomeAssistant(directory: scene.dir.appendingPathComponent("homeassistant"), broker: scene.broker, venv: release.venv)
            do {
                let api = try await home.onboard()
                try await Self.scenario(scene, api, release)
                try await home.stop(api)
                try Self.expectQuietLog(home)
                print("HomeAssistantRunningTests: \(release.version) took \(ContinuousClock.now - began)")
            } catch {
                Attachment.record(home.log, named: "home-assistant-\(release.version).log")
                home.kill()
                throw error
            }
        }
    }

    /// Everything between Home Assistant's onboarding and its stop.
    static func scenario(_ scene: Scene, _ api: HomeAssistantAPI, _ release: Release) async throws {
        // A user adds Ampel to a Home Assistant that runs already: the configs arrive live.
        try await scene.start(configuration: "homeassistant:\n  discovery: \(release.form)\n")

        // The bridge and SK München, found by the unique ids Ampel announces (docs/homeassistant.md).
        let ids = try await api.entityIDs(for: ["ampel_bridge_connectivity", "ampel_district_09162", "ampel_district_09162_incidence",
                                                "ampel_district_09162_alert"])
        let (connectivity, munichPhase, munichIncidence) = (ids["ampel_bridge_connectivity"]!, ids["ampel_district_09162"]!,
                                                           ids["ampel_district_09162_incidence"]!)
        let phase = try #require(try await scene.retained(["ampel/district/09162/phase"], count: 1).first?.payload)
        let augsburgPhase = try #require(try await scene.retained(["ampel/district/09761/phase"], count: 1).first?.payload)
        try #require(phase != augsburgPhase, "the day's data must give München and Augsburg different phases: both \(phase)")
        let districtState = try #require(try await scene.retained(["ampel/district/09162/state"], count: 1).first?.payload)
        let incidence = try #require(Scene.Collector.field("incidence", districtState) as? Double, "\(districtState)")
        try await poll("SK München's sensors showing phase \(phase) and incidence \(incidence), the bridge connected") {
            let states = try await api.states()
            let shown: [String?] = [states[munichPhase]?.state, states[munichIncidence]?.state, states[connectivity]?.state]
            let attribute = states[munichPhase]?.attributes["incidence"] as? Double
            let done = shown[0] == phase && shown[1].flatMap(Double.init) == incidence && shown[2] == "on" && attribute == incidence
            return done ? .done(()) : .waiting("\(shown), attribute incidence \(String(describing: attribute))")
        }

        // An OwnTracks phone in München. Its ids carry a hash: read them from the configs the daemon announced.
        let start = Int(Date().timeIntervalSince1970)  // now: an old fix would be forgotten (devices.forget_after)
        try await scene.fix("alice/phone", at: muenchen, tst: start, input: .owntracks)
        let sensorID = try await announcedUniqueID(scene, stateTopic: "ampel/device/alice/phone/state")
        let eventID = try await announcedUniqueID(scene, stateTopic: "ampel/device/alice/phone/event")
        let deviceIDs = try await api.entityIDs(for: [sensorID, eventID])
        let (devicePhase, deviceEvent) = (deviceIDs[sensorID]!, deviceIDs[eventID]!)
        try await poll("the phone's phase sensor showing \(phase) in SK München") {
            let shown = try await api.states()[devicePhase]
            return shown?.state == phase && shown?.attributes["district"] as? String == "SK München" ? .done(()) : .waiting("\(String(describing: shown))")
        }
        // The first sighting is an event too: its copy for Home Assistant goes once Home
        // Assistant can have subscribed to the new entity (docs/homeassistant.md).
        let before = try await poll("the phone's first-sighting event \(phase)") {
            let event = try await api.states()[deviceEvent]
            let type = event?.attributes["event_type"] as? String
            let done = type == phase && event?.attributes["from"] is NSNull && event?.attributes["district"] as? String == "SK München"
            return done ? .done(event?.state) : .waiting("\(String(describing: event))")
        }

        // To Augsburg: the phase sensor follows, the event entity records the alert.
        let mark = scene.collector.mark
        try await scene.fix("alice/phone", at: augsburg, tst: start + 1, input: .owntracks)
        try await scene.collector.wait("the phone's alert into \(augsburgPhase)", since: mark) { records in
            records.contains { $0.topic == "ampel/device/alice/phone/alert" && Scene.Collector.field("to", $0.payload) as? String == augsburgPhase }
        }
        let alert = try #require(scene.collector.records(since: mark).last { $0.topic == "ampel/device/alice/phone/alert" }?.payload)
        try await poll("the phone's phase \(augsburgPhase) in SK Augsburg and its event \(phase) -> \(augsburgPhase)") {
            let states = try await api.states()
            let (sensor, event) = (states[devicePhase], states[deviceEvent])
            let followed = sensor?.state == augsburgPhase && sensor?.attributes["district"] as? String == "SK Augsburg"
            var recorded = false
            if let event, event.state != before, event.state != "unknown", event.state != "unavailable" {
                let texts: [String?] = ["event_type", "from", "district", "title"].map { event.attributes[$0] as? String }
                let alerted: [String?] = [augsburgPhase, phase, "SK Augsburg", Scene.Collector.field("title", alert) as? String]
                let incidence = event.attributes["incidence"] as? Double
                recorded = texts == alerted && incidence != nil && incidence == Scene.Collector.field("incidence", alert) as? Double
            }
            return followed && recorded ? .done(()) : .waiting("sensor \(String(describing: sensor)), event \(String(describing: event))")
        }

        // kill -9: the broker publishes the Last Will at once (Ampel sets no Will delay), so every
        // entity but Connectivity turns unavailable and Connectivity off within seconds.
        let ampel = try await api.ampelEntities()
        let districts = try rawBavarianIncidences(day: "2020-10-15").count
        #expect(ampel.count == 3 + 3 * districts + 2, "the bridge's 3, 3 per district of Bavaria, the phone's 2: \(ampel.count)")
        let unavailable = try await api.states().filter { ampel.contains($0.key) && $0.value.state == "unavailable" }.keys.sorted()
        #expect(unavailable.isEmpty, "unavailable while the daemon runs: \(unavailable)")
        let killed = ContinuousClock.now
        try await scene.kill()
        try await poll("every Ampel entity unavailable and Connectivity off after kill -9", within: .seconds(10)) {
            let states = try await api.states()
            let wrong = ampel.filter { id in states[id]?.state != (id == connectivity ? "off" : "unavailable") }
            return wrong.isEmpty ? .done(()) : .waiting("\(wrong.count) not yet: \(wrong.prefix(5).map { "\($0)=\(states[$0]?.state ?? "missing")" })")
        }
        print("HomeAssistantRunningTests: unavailable \(ContinuousClock.now - killed) after the kill")

        // A restart: all back, with the values they had.
        try await scene.start(configuration: "homeassistant:\n  discovery: \(release.restartForm)\n")
        try await poll("every Ampel entity available again after the restart") {
            let states = try await api.states()
            let wrong: [String] = ampel.filter { states[$0] == nil || states[$0]?.state == "unavailable" }
            // The event entity keeps its last event (alerts are not retained, none is sent again).
            let shown: [String?] = [munichPhase, devicePhase, connectivity].map { states[$0]?.state }
                + [states[deviceEvent]?.attributes["event_type"] as? String]
            let shownIncidence = states[munichIncidence]?.state
            let back = wrong.isEmpty && shown == [phase, augsburgPhase, "on", augsburgPhase] && shownIncidence.flatMap(Double.init) == incidence
            return back ? .done(()) : .waiting("\(wrong.count) unavailable, \(shown), incidence \(String(describing: shownIncidence))")
        }
        // The same entities, whatever the form: none new (a switch of form moves them over), and
        // no config of the other form left retained.
        #expect(try await api.ampelEntities() == ampel, "the entity registry after the restart")
        try await scene.stop()
        let otherForm = release.restartForm == "device"
            ? ["homeassistant/sensor/ampel/+/config", "homeassistant/event/ampel/+/config", "homeassistant/binary_sensor/ampel/+/config"]
            : ["homeassistant/device/ampel/+/config"]
        // `-W`: mosquitto_sub ends after 2 s without a message, with a status other than 0.
        let (_, left) = try await ChildProcess.run("/usr/bin/mosquitto_sub", [
            "-h", scene.broker.host, "-p", "\(scene.broker.port)", "-v", "--retained-only", "-W", "2",
        ] + otherForm.flatMap { ["-t", $0] })
        let retained = left.split(separator: "\n").filter { $0.hasPrefix("homeassistant/") }
        #expect(retained.isEmpty, "configs of the other form still retained: \(retained.prefix(5))")
    }

    /// The `unique_id` of the config the daemon announced for `stateTopic`.
    static func announcedUniqueID(_ scene: Scene, stateTopic: String) async throws -> String {
        @Sendable func config(_ payload: String) -> String? {
            guard let json = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any] else { return nil }
            // A device config (`homeassistant.discovery: device`) has its entities as components.
            let entities = (json["components"] as? [String: [String: Any]]).map { Array($0.values) } ?? [json]
            return entities.first { $0["state_topic"] as? String == stateTopic }?["unique_id"] as? String
        }
        try await scene.collector.wait("the config of \(stateTopic)") { $0.contains { config($0.payload) != nil } }
        return try #require(scene.collector.records().lazy.compactMap { config($0.payload) }.first)
    }

    /// Fails on any warning or error in Home Assistant's log that concerns Ampel: one naming it
    /// (a discovery topic, an entity, a unique id) or from the MQTT integration or the template
    /// engine, which have nothing to handle here but Ampel's configs. (Other warnings, such as
    /// `--skip-pip`'s, are Home Assistant's own.)
    static func expectQuietLog(_ home: HomeAssistant) throws {
        // The paths hold "ampel" (the test's directories, the venvs under ~/.cache/ampel).
        let text = home.log.replacingOccurrences(of: home.directory.path, with: "<config>").replacingOccurrences(of: home.venv, with: "<venv>")
        var entries: [String] = []
        for line in text.split(separator: "\n") {
            // An entry starts with its date; a traceback's lines belong to the entry before.
            if line.first?.isNumber == true || entries.isEmpty { entries.append(String(line)) } else { entries[entries.count - 1] += "\n" + line }
        }
        let complaints = entries.filter { entry in
            let head = entry.prefix { $0 != "\n" }
            guard [" WARNING ", " ERROR ", " CRITICAL "].contains(where: { head.contains($0) }) else { return false }
            return entry.lowercased().contains("ampel") || head.contains("[homeassistant.components.mqtt")
                || head.contains("[homeassistant.helpers.template]")
        }
        #expect(complaints.isEmpty, "Home Assistant's log complains about Ampel:\n\(complaints.joined(separator: "\n"))")
    }
}

/// What ``poll(_:within:every:_:)`` asks: done, or still waiting (with what it saw).
enum Poll<T> {
    case done(T)
    case waiting(String)
}

/// Asks `probe` every `interval` until it is done, failing after `limit` with what it saw last.
/// Home Assistant pushes nothing to a REST client, so its states are awaited this way.
@discardableResult
func poll<T>(_ what: String, within limit: Duration = .seconds(60), every interval: Duration = .milliseconds(200),
             _ probe: () async throws -> Poll<T>) async throws -> T {
    let deadline = ContinuousClock.now + limit
    while true {
        switch try await probe() {
        case .done(let value): return value
        case .waiting(let seen):
            guard ContinuousClock.now < deadline else { throw TestTimeout(description: "not within \(limit): \(what); last seen: \(seen)") }
        }
        await threadSleep(for: interval)
    }
}

/// A `hass` process of the venv, on a configuration directory of its own: a minimal
/// `configuration.yaml` (no `default_config`, to start in seconds) with `http` on a free loopback
/// port and `api`, and the MQTT integration as a config entry on `broker`, written before start
/// as the UI would have stored it.
final class HomeAssistant: Sendable {
    let directory: URL
    let venv: String
    let port: Int
    let process: ChildProcess
    private let guardProcess: ChildProcess?
    private let output = Watched("")
    private let ended = Watched<ChildProcess.Status?>(nil)

    var baseURL: String { "http://127.0.0.1:\(port)" }
    /// Home Assistant's log (`home-assistant.log`, which it writes beside its configuration, or
    /// its standard error if the file is missing).
    var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("home-assistant.log"), encoding: .utf8)) ?? output.value
    }

    init(directory: URL, broker: MosquittoBroker, venv: String) throws {
        self.directory = directory
        self.venv = venv
        port = try MosquittoBroker.freeLoopbackPort()
        let storage = directory.appendingPathComponent(".storage")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        // `homeassistant` sets what a first start would ask (or guess from the network); the log
        // keeps the MQTT integration's info lines to show what it did when the test fails.
        let configuration = """
            homeassistant:
              name: Test home
              time_zone: UTC
              unit_system: metric
            http:
              server_host: 127.0.0.1
              server_port: \(port)
            api:
            logger:
              default: warning
              logs:
                homeassistant.components.mqtt: info

            """
        try configuration.write(to: directory.appendingPathComponent("configuration.yaml"), atomically: true, encoding: .utf8)
        // The MQTT integration has no YAML set-up since 2023.4 (broker, port and discovery are
        // config entry data); its ConfigFlow is VERSION 1, minor version 1. The storage file is
        // `core.config_entries`, version 1 (homeassistant/config_entries.py).
        let entry: [String: Any] = [
            "entry_id": "ampeltestmqttentry", "version": 1, "minor_version": 1, "domain": "mqtt", "title": broker.host,
            "data": ["broker": broker.host, "port": broker.port, "discovery": true] as [String: Any],
            "options": [String: Any](), "pref_disable_new_entities": false, "pref_disable_polling": false, "source": "user",
            "unique_id": NSNull(), "disabled_by": NSNull(),
        ]
        let entries: [String: Any] = ["version": 1, "minor_version": 1, "key": "core.config_entries", "data": ["entries": [entry]]]
        try JSONSerialization.data(withJSONObject: entries, options: [.sortedKeys])
            .write(to: storage.appendingPathComponent("core.config_entries"))
        let output = self.output
        let ended = self.ended
        // --skip-pip: Home Assistant would otherwise install missing requirements from PyPI while
        // the test waits; install-deps.sh has put them into the venv.
        process = try ChildProcess(
            venv + "/bin/hass", ["--config", directory.path, "--skip-pip"], output: .discard,
            errors: .read { data in output.update { $0 += String(decoding: data, as: UTF8.self) } },
            onExit: { status in ended.update { $0 = status } })
        // Killed with the test process even if that crashes.
        guardProcess = ChildProcess.guarding(process.pid)
    }

    deinit { kill() }

    /// SIGKILL, for a test that failed half-way.
    func kill() {
        guardProcess?.signal(SIGKILL)
        process.signal(SIGKILL)
        guardProcess?.closeInput()
    }

    /// Home Assistant's own stop, asked for over the REST API (the `homeassistant.stop` service),
    /// and its end: it stops its integrations and has written its log. Not SIGTERM: Python's
    /// asyncio hears of a signal through a byte in its self-pipe, which the MQTT integration's
    /// thread fills with a byte per message while the loop works through a burst (Ampel's ~300
    /// configs after a restart); the signal's byte is then dropped ("Exception ignored when trying
    /// to write to the signal wakeup fd") and Home Assistant runs on. A request is not lost.
    func stop(_ api: HomeAssistantAPI) async throws {
        guardProcess?.signal(SIGKILL)
        guardProcess?.closeInput()
        // The answer may never come: the server closes as Home Assistant stops.
        _ = try? await HomeAssistantAPI.request("POST", baseURL + "/api/services/homeassistant/stop", token: api.token, json: [:])
        let ended = self.ended
        do {
            try await withTimeout(.seconds(60), "Home Assistant to stop") { await ended.wait { $0 != nil } }
        } catch {
            process.signal(SIGKILL)
            throw error
        }
    }

    /// Waits for the HTTP server, then onboards a user over the REST API as the frontend does
    /// (`POST /api/onboarding/users` gives an authorization code, `POST /auth/token` trades it for
    /// an access token) and returns the API with that token.
    func onboard() async throws -> HomeAssistantAPI {
        let clientID = baseURL + "/"  // IndieAuth: a URL; Home Assistant's own host is accepted
        try await poll("Home Assistant's HTTP server on \(baseURL)", within: .seconds(120)) {
            if let status = ended.value { throw TestTimeout(description: "Home Assistant ended (\(status)):\n\(output.value.suffix(3000))") }
            let answer = try? await HomeAssistantAPI.request("GET", baseURL + "/api/onboarding")
            return answer?.status == 200 ? .done(()) : .waiting(answer.map { "HTTP \($0.status)" } ?? "no answer")
        }
        let user: [String: Any] = ["client_id": clientID, "name": "Test", "username": "test", "password": "test-password-1", "language": "en"]
        let created = try await HomeAssistantAPI.request("POST", baseURL + "/api/onboarding/users", json: user)
        let code = try #require(created.json?["auth_code"] as? String, "onboarding: \(created.status) \(created.text)")
        let form = "grant_type=authorization_code&code=\(code)&client_id=\(clientID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? clientID)"
        let token = try await HomeAssistantAPI.request("POST", baseURL + "/auth/token", form: form)
        let access = try #require(token.json?["access_token"] as? String, "token: \(token.status) \(token.text)")
        return HomeAssistantAPI(baseURL: baseURL, token: access)
    }
}

/// Home Assistant's REST API with an access token, and its entity registry (websocket only,
/// through scripts/ha-websocket.py in the venv): the REST states show no unique ids.
struct HomeAssistantAPI {
    /// One entity's state as `/api/states` shows it.
    struct EntityState: CustomStringConvertible {
        let state: String
        let attributes: [String: Any]
        var description: String { "\(state) \(attributes)" }
    }

    let baseURL: String
    let token: String

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/ha-websocket.py").path

    static func request(_ method: String, _ url: String, token: String? = nil, json: [String: Any]? = nil, form: String? = nil) async throws -> HTTPAnswer {
        var headers: [String: String] = [:]
        var body: Data?
        if let token { headers["Authorization"] = "Bearer \(token)" }
        if let json {
            headers["Content-Type"] = "application/json"
            body = try JSONSerialization.data(withJSONObject: json)
        }
        if let form {
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            body = Data(form.utf8)
        }
        // Home Assistant beside CI's parallel suites answered a request after more than 10 s.
        return try await httpRequest(method, url, headers: headers, body: body, timeout: 60)
    }

    /// Every entity's state, by entity id.
    func states() async throws -> [String: EntityState] {
        let answer = try await Self.request("GET", baseURL + "/api/states", token: token)
        try #require(answer.status == 200, "/api/states: \(answer.status) \(answer.text.prefix(300))")
        let list = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [[String: Any]])
        var states: [String: EntityState] = [:]
        for item in list {
            guard let id = item["entity_id"] as? String, let state = item["state"] as? String else { continue }
            states[id] = EntityState(state: state, attributes: item["attributes"] as? [String: Any] ?? [:])
        }
        return states
    }

    /// The entity registry's MQTT entries: unique id -> entity id.
    func registry() async throws -> [String: String] {
        let (status, output) = try await ChildProcess.run(HomeAssistantDiscoveryTests.venv + "/bin/python",
                                                          [Self.script, baseURL, token, "config/entity_registry/list"])
        try #require(status.exitCode == 0, "ha-websocket.py: \(status) \(output)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]], "\(output.prefix(300))")
        var ids: [String: String] = [:]
        for entry in entries where entry["platform"] as? String == "mqtt" {
            if let unique = entry["unique_id"] as? String, let id = entry["entity_id"] as? String { ids[unique] = id }
        }
        return ids
    }

    /// The entity ids of `uniqueIDs`, once Home Assistant has created them all.
    func entityIDs(for uniqueIDs: [String]) async throws -> [String: String] {
        try await poll("Home Assistant's entities of \(uniqueIDs)") {
            let registry = try await registry()
            let missing = uniqueIDs.filter { registry[$0] == nil }
            return missing.isEmpty ? .done(registry.filter { uniqueIDs.contains($0.key) }) : .waiting("missing \(missing)")
        }
    }

    /// The entity ids of everything Ampel announced (unique ids `ampel_…`).
    func ampelEntities() async throws -> [String] {
        try await registry().filter { $0.key.hasPrefix("ampel_") }.values.sorted()
    }
}
