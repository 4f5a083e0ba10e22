import AmpelMessages
import Foundation
@testable import AmpelDaemon
import AmpelDomain
import AmpelMQTT
import Logging
import Testing

@Suite("Configuration")
struct ConfigurationTests {
    func load(_ yaml: String?, env: [String: String] = [:], flags: ConfigurationOverrides = .init()) throws(ConfigurationError) -> DaemonConfiguration {
        try DaemonConfiguration.load(yaml: yaml, environment: env, flags: flags)
    }

    func error(_ yaml: String?, env: [String: String] = [:], flags: ConfigurationOverrides = .init()) -> ConfigurationError? {
        do {
            _ = try load(yaml, env: env, flags: flags)
            return nil
        } catch {
            return error
        }
    }

    @Test("the daemon's MQTT client: persistent session, large windows, its network thread in the normal class")
    func daemonClientConfiguration() throws {
        let mqtt = try MQTTClient.daemonConfiguration(try load(nil))
        #expect(!mqtt.cleanStart && mqtt.sessionExpiry == .seconds(7 * 86_400))
        #expect(mqtt.receiveMaximum == 1000 && mqtt.maxInflight == 1000)
        // It runs the daemon's loop (decision 27); the library's default is SCHED_BATCH.
        #expect(mqtt.networkThreadPolicy == .normal)
        #expect(MQTTConfiguration(host: "h", clientID: "c").networkThreadPolicy == .batch)
    }

    @Test("no file means defaults: local broker, bundled snapshot, the standard inputs, discovery on")
    func defaults() throws {
        let config = try load(nil)
        #expect(config.broker.urls.first == MQTTBrokerURL(host: "localhost", port: 1883, usesTLS: false))
        #expect(config.data.source == .snapshot)
        #expect(config.data.refresh == .seconds(600))
        #expect(config.data.maxAge == .seconds(48 * 3600))
        #expect(config.logLevel == .info)
        #expect(config.mqtt.protocolVersion == .v5)
        #expect(config.mqtt.keepAlive == .seconds(60))
        #expect(config.mqtt.sessionExpiry == .seconds(7 * 86_400))
        #expect(config.mqtt.alertQoS == nil && config.mqtt.announcementQoS == .exactlyOnce, "alerts with QoS 2 on MQTT 5")
        #expect(config.alerts.expiry == .seconds(3600))
        #expect(config.alerts.maxFixAge == .seconds(900))
        #expect(config.alerts.minDwell == .none)
        #expect(config.inputs.maxAccuracy == 1000)
        #expect(config.inputs.owntracks.map(\.filter) == ["owntracks/+/+"])
        #expect(config.inputs.plain.map(\.filter) == ["ampel/location/+"])
        #expect(config.inputs.traccar.isEmpty)
        #expect(config.homeAssistant.discovery)
        #expect(config.homeAssistant.prefix == "homeassistant")
        #expect(config.homeAssistant.devices)
        #expect(config.homeAssistant.form == .entity, "one config per entity, which every Home Assistant reads")
        #expect(config.notify.owntracks)
        #expect(config.notify.owntracksDevice == "ampel")
        #expect(config.baseTopic == "ampel")
        #expect(config.mqtt.clientID == "ampel")
        // The default state directory of every command, not ./ampel-state (StateDirectoryTests).
        #expect(config.stateDirectory == FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/state/ampel").path)
        #expect(config.lamps.isEmpty)
        #expect(try load("") == config)
        #expect(try load("# only a comment\n") == config)
    }

    static let full = """
    broker: mqtts://broker.example:8884
    base_topic: ampel
    state_dir: /var/lib/ampel
    lang: de
    log_level: debug
    rules: bavaria-initial
    mqtt:
      client_id: ampel-prod
      username: ampel
      keepalive: 30s
      protocol: 3.1.1
      session_expiry: 2d
      alert_qos: 2
    data:
      source: rki
      url: http://127.0.0.1:8080/query
      refresh: 10m
      max_age: 48h
    inputs:
      owntracks: owntracks/+/+
      plain: [ampel/location/+, cars/+]
      traccar: traccar/positions
      max_payload: 8192
    alerts:
      expiry: 30m
    devices:
      alice/phone: {lang: de, name: Alice}
      car:
    homeassistant:
      discovery: false
      devices: false
      prefix: ha
    notify:
      owntracks: false
      owntracks_device: ampel-bot
    lamps:
      - name: hall
        driver: wled
        topic: wled/hall
        district: 09162
      - driver: tasmota
        topic: lamp2
        device: alice/phone
      - driver: plain
        topic: signs/door
        district: "09184"
        availability_topic: signs/door/online
        online_payload: "1"
    """

    @Test("every key of a full file is read")
    func fullFile() throws {
        let config = try load(Self.full)
        #expect(config.broker.urls.first == MQTTBrokerURL(host: "broker.example", port: 8884, usesTLS: true))
        #expect(config.stateDirectory == "/var/lib/ampel")
        #expect(config.language == .de)
        #expect(config.logLevel == .debug)
        #expect(config.rules == "bavaria-initial")
        #expect(config.mqtt.clientID == "ampel-prod")
        #expect(config.mqtt.username == "ampel")
        #expect(config.mqtt.keepAlive == .seconds(30))
        #expect(config.mqtt.protocolVersion == .v311)
        #expect(config.mqtt.sessionExpiry == .seconds(2 * 86_400))
        #expect(config.mqtt.announcementQoS == .exactlyOnce, "alert_qos 2 on 3.1.1 as set")
        #expect(config.data.source == .rki)
        #expect(config.data.url == "http://127.0.0.1:8080/query")
        #expect(config.data.refresh == .seconds(600))
        #expect(config.data.maxAge == .seconds(48 * 3600))
        #expect(config.inputs.plain.map(\.filter) == ["ampel/location/+", "cars/+"])
        #expect(config.inputs.traccar.map(\.filter) == ["traccar/positions"])
        #expect(config.inputs.maxPayload == 8192)
        #expect(config.alerts.expiry == .seconds(1800))
        #expect(config.devices["alice/phone"] == .init(lang: .de, name: "Alice"))
        #expect(config.devices["car"] == .init())
        #expect(!config.homeAssistant.discovery)
        for (value, on, form) in [("device", true, DiscoveryForm.device), ("entity", true, .entity), ("true", true, .entity), ("off", false, .entity)] {
            let other = try load("homeassistant:\n  discovery: \(value)\n")
            #expect(other.homeAssistant.discovery == on && other.homeAssistant.form == form, "\(value)")
        }
        #expect(config.homeAssistant.prefix == "ha")
        #expect(!config.homeAssistant.devices)
        #expect(!config.notify.owntracks)
        #expect(config.notify.owntracksDevice == "ampel-bot")
        #expect(config.lamps.count == 3)
        // An unquoted 09162 stays the district code, not the number 9162.
        #expect(config.lamps[0] == LampSettings(name: "hall", driver: .wled, topic: "wled/hall", follows: .district("09162")))
        #expect(config.lamps[1] == LampSettings(name: "lamp2", driver: .tasmota, topic: "lamp2", follows: .device("alice/phone")))
        #expect(config.lamps[2].availabilityTopic == "signs/door/online")
        #expect(config.lamps[2].onlinePayload == "1")
    }

    @Test("an unknown key is an error naming the key and its line")
    func unknownKey() {
        let e = error("broker: mqtt://localhost\ndata:\n  source: rki\n  refrsh: 10m\n")
        #expect(e?.key == "data.refrsh")
        #expect(e?.line == 4)
        #expect(e?.description.contains("config line 4: data.refrsh: unknown key") == true)
        #expect(error("lamp:\n  - x\n")?.key == "lamp")
    }

    @Test("a bad value names the key and its line", arguments: [
        ("data:\n  refresh: ten minutes\n", "data.refresh", 2),
        ("broker: http://x\n", "broker", 1),
        ("lang: fr\n", "lang", 1),
        ("log_level: loud\n", "log_level", 1),
        ("data:\n  source: web\n", "data.source", 2),
        ("data:\n  date: 2020-13-01\n", "data.date", 2),
        ("inputs:\n  plain: a/#/b\n", "inputs.plain", 2),
        ("inputs:\n  plain: [ok/+, 'bad/b+']\n", "inputs.plain[1]", 2),
        ("mqtt:\n  keepalive: 1\n", "mqtt.keepalive", 2),
        ("mqtt:\n  protocol: 4\n", "mqtt.protocol", 2),
        ("homeassistant:\n  discovery: maybe\n", "homeassistant.discovery", 2),
        ("homeassistant:\n  devices: some\n", "homeassistant.devices", 2),
        ("notify:\n  owntracks: sometimes\n", "notify.owntracks", 2),
        ("notify:\n  owntracks_device: ampel/bot\n", "notify.owntracks_device", 2),
        ("notify:\n  owntracks_device: \"+\"\n", "notify.owntracks_device", 2),
        ("notify:\n  owntrack: true\n", "notify.owntrack", 2),
        ("devices:\n  a/+: {lang: de}\n", "devices.a/+", 2),
        ("lamps:\n  - driver: hue\n    topic: x\n    district: '09162'\n", "lamps[0].driver", 2),
        ("lamps:\n  - driver: plain\n    topic: x\n", "lamps[0]", 2),
        ("lamps:\n  - driver: plain\n    topic: x\n    district: '9162'\n", "lamps[0].district", 4),
        ("lamps:\n  - driver: wled\n    topic: x\n    district: '09162'\n    device: car\n", "lamps[0].device", 5),
        ("lamps:\n  - driver: wled\n    topic: x\n    district: '09162'\n    online_payload: up\n", "lamps[0].online_payload", 5),
        ("lamps:\n  - {driver: plain, topic: a, device: x}\n  - {driver: plain, topic: a, device: y}\n", "lamps[1].name", 3),
        ("data: [1, 2]\n", "data", 1),
        ("base_topic: a/+\n", "base_topic", 1),
        ("alerts:\n  expiry: 0\n", "alerts.expiry", 2),
        ("alerts:\n  max_fix_age: 0\n", "alerts.max_fix_age", 2),
        ("alerts:\n  max_fix_age: soon\n", "alerts.max_fix_age", 2),
        ("alerts:\n  expiry: 1h\n  min_dwell: 3 laps\n", "alerts.min_dwell", 3),
        ("alerts:\n  min_dwell: -3 fixes\n", "alerts.min_dwell", 2),
        ("alerts:\n  min_dwell: 1.5 fixes\n", "alerts.min_dwell", 2),
        ("alerts:\n  min_dwell: 60 seconds\n", "alerts.min_dwell", 2),
        ("alerts:\n  min_dwell: [60s]\n", "alerts.min_dwell", 2),
        ("inputs:\n  max_accuracy: 0\n", "inputs.max_accuracy", 2),
        ("inputs:\n  max_accuracy: 1.5km\n", "inputs.max_accuracy", 2),
        ("inputs:\n  max_accuracy: -100\n", "inputs.max_accuracy", 2),
    ])
    func badValues(yaml: String, key: String, line: Int) {
        let e = error(yaml)
        #expect(e?.key == key, "\(yaml)")
        #expect(e?.line == line, "\(yaml)")
    }

    @Test("alert rules: durations or fix counts for the dwell, false switches a limit off", arguments: [
        ("alerts:\n  min_dwell: 60s\n", Dwell.seconds(60), Duration?.some(.seconds(900)), Int?.some(1000)),
        ("alerts:\n  min_dwell: 2m\n  max_fix_age: 1h\n", Dwell.seconds(120), Duration?.some(.seconds(3600)), Int?.some(1000)),
        ("alerts:\n  min_dwell: 3 fixes\n  max_fix_age: false\n", Dwell.fixes(3), nil, Int?.some(1000)),
        ("alerts:\n  min_dwell: 1 fix\ninputs:\n  max_accuracy: 250\n", Dwell.fixes(1), Duration?.some(.seconds(900)), Int?.some(250)),
        ("alerts:\n  min_dwell: 0\ninputs:\n  max_accuracy: off\n", Dwell.seconds(0), Duration?.some(.seconds(900)), nil),
    ])
    func alertRules(yaml: String, dwell: Dwell, maxFixAge: Duration?, maxAccuracy: Int?) throws {
        let config = try load(yaml)
        #expect(config.alerts.minDwell == dwell)
        #expect(config.alerts.maxFixAge == maxFixAge)
        #expect(config.inputs.maxAccuracy == maxAccuracy)
    }

    @Test("outputs: on_change, a 60 s heartbeat and no texts in the states by default; each key read; bad values named")
    func outputs() throws {
        let defaults = try load(nil)
        #expect(defaults.outputs == .init(deviceState: .onChange, heartbeat: .seconds(60), textsInState: false))
        let set = try load("outputs:\n  device_state: every_fix\n  heartbeat: 5m\n  texts_in_state: true\n")
        #expect(set.outputs == .init(deviceState: .everyFix, heartbeat: .seconds(300), textsInState: true))
        let mode = error("outputs:\n  device_state: sometimes\n")
        #expect(mode?.key == "outputs.device_state" && mode?.line == 2)
        #expect(mode?.message.contains("every_fix, on_change") == true)
        #expect(error("outputs:\n  heartbeat: 0\n")?.key == "outputs.heartbeat")
        #expect(error("outputs:\n  texts_in_state: maybe\n")?.key == "outputs.texts_in_state")
        #expect(error("outputs:\n  texts: true\n")?.key == "outputs.texts")
    }

    @Test("a syntax error names its line; a key given twice is an error")
    func syntax() {
        let e = error("broker: mqtt://a\ndata:\n  source: [rki\n")
        #expect(e?.line != nil)
        #expect(e?.key == "(syntax)")
        let twice = error("lang: de\nlang: en\n")
        #expect(twice?.key == "lang")
        #expect(twice?.line == 2)
    }

    @Test("flags win over variables, variables over the file")
    func overrides() throws {
        let yaml = "broker: mqtt://file:1883\nlang: de\ndata:\n  refresh: 5m\n  source: history\n"
        let fromFile = try load(yaml)
        #expect(fromFile.broker.first.host == "file")
        #expect(fromFile.data.refresh == .seconds(300))

        let env = ["AMPEL_BROKER": "mqtt://env:1884", "AMPEL_REFRESH": "90", "AMPEL_LANG": "en", "AMPEL_STATE_DIR": "/tmp/s",
                   "AMPEL_SOURCE": "snapshot", "AMPEL_DATE": "2020-11-05", "AMPEL_LOG_LEVEL": "warning", "AMPEL_URL": "http://127.0.0.1:9/q",
                   "AMPEL_MQTT_PASSWORD": "secret"]
        let fromEnv = try load(yaml, env: env)
        #expect(fromEnv.broker.urls.first == MQTTBrokerURL(host: "env", port: 1884, usesTLS: false))
        #expect(fromEnv.data.refresh == .seconds(90))
        #expect(fromEnv.language == .en)
        #expect(fromEnv.stateDirectory == "/tmp/s")
        #expect(fromEnv.data.source == .snapshot)
        #expect(fromEnv.data.date == Day(iso: "2020-11-05"))
        #expect(fromEnv.logLevel == .warning)
        #expect(fromEnv.data.url == "http://127.0.0.1:9/q")
        #expect(fromEnv.mqtt.password == "secret")

        let flags = ConfigurationOverrides(broker: "mqtts://flag", source: "rki", refresh: "10m", lang: "de")
        let fromFlags = try load(yaml, env: env, flags: flags)
        #expect(fromFlags.broker.urls.first == MQTTBrokerURL(host: "flag", port: 8883, usesTLS: true))
        #expect(fromFlags.data.source == .rki)
        #expect(fromFlags.data.refresh == .seconds(600))
        #expect(fromFlags.language == .de)
        #expect(fromFlags.stateDirectory == "/tmp/s")
    }

    @Test("a bad flag or variable is named")
    func badOverrides() {
        #expect(error(nil, flags: .init(refresh: "soon"))?.key == "--refresh")
        #expect(error(nil, env: ["AMPEL_BROKER": "ftp://x"])?.key == "AMPEL_BROKER")
        #expect(error(nil, flags: .init(source: "web"))?.key == "--source")
        #expect(error(nil, flags: .init(date: "5.11.2020"))?.key == "--date")
        #expect(error(nil, flags: .init(refresh: "0"))?.key == "--refresh")
        #expect(error(nil, flags: .init(logLevel: "loud"))?.line == nil)
    }

    @Test("durations: seconds or a unit", arguments: [("600", 600), ("10m", 600), ("30s", 30), ("48h", 172_800), ("2d", 172_800), (" 5M ", 300)])
    func durations(text: String, seconds: Int) throws {
        #expect(try DaemonConfiguration.duration(text) == .seconds(seconds))
    }

    @Test("the file, flags and variables take the broker URL as MQTTBrokerURL reads it")
    func brokerURLs() throws {
        #expect(try load("broker: mqtt://u:p@h:1\n").broker.urls == [MQTTBrokerURL(host: "h", port: 1, usesTLS: false, username: "u", password: "p")])
        #expect(try load(nil, flags: .init(broker: "mqtts://[::1]")).broker.urls == [MQTTBrokerURL(host: "::1", port: 8883, usesTLS: true)])
        let bad = error("broker: localhost:1883\n")
        #expect(bad?.key == "broker")
        #expect(bad?.line == 1)
        #expect(bad?.message.contains("invalid broker URL 'localhost:1883'") == true)
        #expect(error(nil, env: ["AMPEL_BROKER": "mqtt://h:"])?.key == "AMPEL_BROKER")
        #expect(MQTTBrokerURL(host: "h", port: 8883, usesTLS: true, username: "u", password: "secret").description == "mqtts://h:8883")
    }

    @Test("a list of brokers: a YAML list or comma-separated URLs, one scheme, one login, no node twice")
    func brokerLists() throws {
        let nodes = [MQTTBrokerURL(host: "n1", port: 1883, usesTLS: false, username: "u", password: "p"),
                     MQTTBrokerURL(host: "n2", port: 1884, usesTLS: false, username: "u", password: "p")]
        #expect(try load("broker:\n  - mqtt://u:p@n1\n  - mqtt://n2:1884\n").broker.urls == nodes)
        #expect(try load(nil, flags: .init(broker: "mqtt://u:p@n1, mqtt://u:p@n2:1884")).broker.urls == nodes)
        #expect(try load(nil, env: ["AMPEL_BROKER": "mqtt://n1,mqtt://u:p@n2:1884"]).broker.urls == nodes)
        #expect(try load(nil, flags: .init(broker: "mqtt://n1,mqtt://n2")).broker.description == "mqtt://n1:1883,mqtt://n2:1883")

        let mixed = error("broker:\n  - mqtts://n1\n  - mqtt://n2\n")
        #expect(mixed?.key == "broker")
        #expect(mixed?.line == 2)
        #expect(mixed?.message.contains("mqtts://n1:8883 uses TLS and mqtt://n2:1883 does not") == true)
        #expect(error(nil, flags: .init(broker: "mqtt://n1,mqtts://n2"))?.key == "--broker")
        #expect(error(nil, flags: .init(broker: "mqtt://a:b@n1,mqtt://a:c@n2"))?.message.contains("different credentials") == true)
        #expect(error(nil, env: ["AMPEL_BROKER": "mqtt://n1,mqtt://N1:1883"])?.message.contains("listed twice") == true)
        #expect(error(nil, flags: .init(broker: "mqtt://n1,,mqtt://n2"))?.message.contains("empty entry") == true)
        let badEntry = error("broker:\n  - mqtt://n1\n  - n2:1883\n")
        #expect(badEntry?.key == "broker[1]")
        #expect(badEntry?.line == 3)
        #expect(error("broker: []\n")?.message.contains("no broker given") == true)
    }

    @Test("partitions: a bridge topic per instance, district outputs switched off")
    func partitionSettings() throws {
        let defaults = try load(nil)
        #expect(defaults.outputs.districts)
        #expect(defaults.topics.bridgeState == "ampel/bridge/state")
        let fleetB = try load("bridge_topic: ampel/bridge/fleet-b\noutputs:\n  districts: false\n")
        #expect(!fleetB.outputs.districts)
        #expect(fleetB.topics.bridgeState == "ampel/bridge/fleet-b/state")
        #expect(fleetB.topics.bridgeInfo == "ampel/bridge/fleet-b/info")
        #expect(fleetB.topics.deviceState("a/b") == "ampel/device/a/b/state")
        #expect(error("bridge_topic: ampel/+/x\n")?.key == "bridge_topic")
        #expect(error("outputs:\n  district: false\n")?.key == "outputs.district")
    }

    @Test("log levels and protocol versions become the libraries' types", arguments: [
        ("log_level: TRACE\nmqtt:\n  protocol: '5.0'\n", Logger.Level.trace, MQTTConfiguration.ProtocolVersion.v5),
        ("log_level: critical\nmqtt:\n  protocol: 311\n", .critical, .v311),
    ])
    func typedValues(yaml: String, level: Logger.Level, version: MQTTConfiguration.ProtocolVersion) throws {
        let config = try load(yaml)
        #expect(config.logLevel == level)
        #expect(config.mqtt.protocolVersion == version)
    }

    @Test("systemd's STATE_DIRECTORY is the default state directory")
    func stateDirectory() throws {
        #expect(try load(nil, env: ["STATE_DIRECTORY": "/var/lib/ampel"]).stateDirectory == "/var/lib/ampel")
    }

    @Test("inputs can be switched off")
    func inputsOff() throws {
        let config = try load("inputs:\n  owntracks: false\n  plain: []\n  traccar:\n")
        #expect(config.inputs.owntracks.isEmpty)
        #expect(config.inputs.plain.isEmpty)
        #expect(config.inputs.traccar.isEmpty)
    }
}

@Suite("Example configuration and intake routing")
struct ExampleAndIntakeTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("deploy/ampel.example.yaml is valid and means what its comments say: local as it is, production with the #P lines")
    func example() throws {
        let text = try String(contentsOf: Self.repository.appendingPathComponent("deploy/ampel.example.yaml"), encoding: .utf8)
        // As it is: a local broker, bundled data, the default state directory, nothing on the internet.
        let local = try DaemonConfiguration.load(yaml: text, environment: ["HOME": "/home/x"])
        #expect(local.broker.urls == [MQTTBrokerURL(host: "127.0.0.1", port: 1883, usesTLS: false)])
        #expect(local.data.source == .bundled)
        #expect(local.stateDirectory == "/home/x/.local/state/ampel")
        #expect(local.mqtt.username == nil && local.mqtt.caFile == nil)
        #expect(local.lamps.isEmpty)
        #expect(local.notify.webhooks.isEmpty)

        // The production settings, as the file's header says to make them (its sed command).
        var lines: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) where !line.hasSuffix("# local") {
            let indent = line.prefix { $0 == " " }
            lines.append(line.dropFirst(indent.count).hasPrefix("#P ") ? String(indent) + line.dropFirst(indent.count + 3) : String(line))
        }
        let config = try DaemonConfiguration.load(yaml: lines.joined(separator: "\n"), environment: ["HOME": "/home/x"])
        #expect(config.broker.urls.first == MQTTBrokerURL(host: "mqtt.example.org", port: 8883, usesTLS: true))
        #expect(config.stateDirectory == "/var/lib/ampel")
        #expect(config.mqtt.username == "ampel")
        #expect(config.data.source == .rki)
        #expect(config.lamps.map(\.name) == ["window", "hall", "door"])
        #expect(config.lamps[0].follows == .district("09162"))
        #expect(config.devices["alice/phone"]?.lang == .de)
        #expect(config.forgetAfter == .seconds(30 * 86_400))
        #expect(config.devices["forget_after"] == nil)
        #expect(config.http.listen == HTTPListenAddress(host: "127.0.0.1", port: 8080))
        #expect(config.http.showPositions == false)
        #expect(config.inputs.maxAccuracy == 1000)
        #expect(config.alerts.maxFixAge == .seconds(900))
        #expect(config.alerts.minDwell == .seconds(60))
        #expect(config.notify.webhooks.map(\.name) == ["ntfy-alice", "gotify"])
        #expect(config.notify.webhooks[0].headers.first { $0.name == "X-Title" }?.value == "{{.title}}")
        #expect(config.notify.webhooks[1].wants(district: "09162") && !config.notify.webhooks[1].wants(device: "alice/phone"))
        #expect(config.homeAssistant.devices)
        #expect(config.outputs == .init(deviceState: .onChange, heartbeat: .seconds(60), textsInState: false))
        // Local and production differ only where the file says so.
        var production = local
        production.broker = config.broker
        production.stateDirectory = config.stateDirectory
        production.mqtt = config.mqtt
        production.data.source = config.data.source
        production.lamps = config.lamps
        production.notify.webhooks = config.notify.webhooks
        #expect(production == config)
    }

    @Test("docs/configuration.md documents every key the reader accepts")
    func documented() throws {
        let doc = try String(contentsOf: Self.repository.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let keys = ["broker", "base_topic", "bridge_topic", "outputs.districts", "state_dir", "lang", "log_level", "rules", "mqtt.client_id", "mqtt.username", "mqtt.password",
                    "mqtt.ca_file", "mqtt.cert_file", "mqtt.key_file", "mqtt.keepalive", "mqtt.protocol", "mqtt.session_expiry", "mqtt.alert_qos",
                    "data.source", "data.url", "data.date", "data.refresh", "data.max_age", "inputs.owntracks", "inputs.plain",
                    "inputs.traccar", "inputs.max_payload", "inputs.max_accuracy", "alerts.expiry",
                    "alerts.max_fix_age", "alerts.min_dwell", "devices.<key>.lang", "devices.<key>.name",
                    "homeassistant.discovery", "homeassistant.devices", "homeassistant.prefix", "homeassistant.status_topic", "availability_topic", "online_payload",
                    "notify.webhooks[]", "notify.owntracks", "notify.owntracks_device", "outputs.device_state", "outputs.heartbeat",
                    "outputs.texts_in_state",
                    "AMPEL_BROKER", "AMPEL_SOURCE", "AMPEL_URL", "AMPEL_DATE", "AMPEL_STATE_DIR", "AMPEL_REFRESH", "AMPEL_LANG",
                    "AMPEL_LOG_LEVEL", "AMPEL_CONFIG", "AMPEL_MQTT_PASSWORD"]
        for key in keys {
            #expect(doc.contains("`\(key)`"), "\(key) is not documented")
        }
    }

    @Test("intake: inputs by filter, lamp availability, Home Assistant status")
    func routing() throws {
        var config = DaemonConfiguration()
        config.inputs.traccar = [try! MQTTTopicFilter("traccar/positions")]
        // Apps elsewhere, and a filter whose key is more than the app's user and device.
        config.inputs.owntracks.append(try! MQTTTopicFilter("owntracks-eu/+/+"))
        config.inputs.plain.append(try! MQTTTopicFilter("fleet/#"))
        config.lamps = [
            LampSettings(name: "w", driver: .wled, topic: "wled/w", follows: .district("09162")),
            LampSettings(name: "t", driver: .tasmota, topic: "t1", follows: .district("09162")),
        ]
        let intake = Intake(configuration: config)
        #expect(intake.subscriptions == ["owntracks/+/+", "owntracks-eu/+/+", "ampel/location/+", "fleet/#", "traccar/positions",
                                         "tele/t1/LWT", "wled/w/status", "homeassistant/status"])
        func route(_ topic: String, _ text: String = "{}") -> [Intake.Route] { intake.route(topic: topic, payload: Array(text.utf8)) }
        // Only an OwnTracks fix on owntracks/<user>/<device> comes from an app that hears transitions.
        #expect(route("owntracks/a/b") == [.input(.owntracks, key: "a/b", appTopic: true)])
        #expect(route("owntracks-eu/a/b") == [.input(.owntracks, key: "a/b", appTopic: false)])
        #expect(route("ampel/location/car") == [.input(.plain, key: "car", appTopic: false)])
        #expect(route("fleet/owntracks/a/b") == [.input(.plain, key: "owntracks/a/b", appTopic: false)])
        #expect(route("traccar/positions") == [.input(.traccar, key: "", appTopic: false)])
        #expect(route("wled/w/status", "online") == [.lampAvailability(name: "w", online: true, retained: false)])
        #expect(route("wled/w/status", "offline") == [.lampAvailability(name: "w", online: false, retained: false)])
        #expect(route("tele/t1/LWT", "Online") == [.lampAvailability(name: "t", online: true, retained: false)])
        #expect(intake.route(topic: "tele/t1/LWT", payload: Array("Online".utf8), retained: true) == [.lampAvailability(name: "t", online: true, retained: true)])
        #expect(route("homeassistant/status", "online") == [.homeAssistantOnline])
        #expect(route("homeassistant/status", "offline") == [.ignore])
        #expect(route("elsewhere") == [.ignore])
    }
}

@Suite("Configuration: http and devices.forget_after")
struct HTTPConfigurationTests {
    @Test("http.listen defaults to 127.0.0.1:8080; file, AMPEL_HTTP and --http override in that order; false switches it off")
    func listen() throws {
        #expect(try DaemonConfiguration.load(yaml: nil).http.listen == HTTPListenAddress(host: "127.0.0.1", port: 8080))
        let file = "http:\n  listen: 127.0.0.1:9000\n"
        #expect(try DaemonConfiguration.load(yaml: file).http.listen?.port == 9000)
        #expect(try DaemonConfiguration.load(yaml: file, environment: ["AMPEL_HTTP": "127.0.0.1:9001"]).http.listen?.port == 9001)
        #expect(try DaemonConfiguration.load(yaml: file, environment: ["AMPEL_HTTP": "127.0.0.1:9001"],
                                             flags: .init(http: "[::1]:9002")).http.listen == HTTPListenAddress(host: "::1", port: 9002))
        #expect(try DaemonConfiguration.load(yaml: "http:\n  listen: false\n").http.listen == nil)
        #expect(try DaemonConfiguration.load(yaml: nil, flags: .init(http: "false")).http.listen == nil)
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.load(yaml: "http:\n  listen: nowhere\n") }
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.load(yaml: nil, flags: .init(http: "1.2.3.4:99999")) }
    }

    @Test("a listen address beyond loopback without http.auth is a configuration error naming http.auth; with a token or Basic it loads")
    func authBeyondLoopback() throws {
        let open = "http:\n  listen: 0.0.0.0:8080\n"
        do {
            _ = try DaemonConfiguration.load(yaml: open)
            Issue.record("loaded without credentials")
        } catch {
            #expect(error.key == "http.auth")
            #expect(error.message.contains("AMPEL_HTTP_TOKEN"))
        }
        let token = try DaemonConfiguration.load(yaml: open, environment: ["AMPEL_HTTP_TOKEN": "s3cret"])
        #expect(token.http.auth.token == "s3cret")
        let basic = try DaemonConfiguration.load(yaml: open + "  auth:\n    username: ops\n", environment: ["AMPEL_HTTP_PASSWORD": "pw"])
        #expect(basic.http.auth.basic?.username == "ops")
        // A user without a password is no credential.
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.load(yaml: open + "  auth:\n    username: ops\n") }
        // A password without a user is no credential either, on loopback too.
        for yaml in [open, "http:\n  listen: 127.0.0.1:8080\n"] {
            do {
                _ = try DaemonConfiguration.load(yaml: yaml, environment: ["AMPEL_HTTP_PASSWORD": "pw"])
                Issue.record("loaded a password without a user: \(yaml)")
            } catch {
                #expect(error.key == "http.auth.username")
                #expect(error.message.contains("AMPEL_HTTP_USERNAME"))
            }
        }
        #expect(try DaemonConfiguration.load(yaml: nil, environment: ["AMPEL_HTTP_PASSWORD": "pw", "AMPEL_HTTP_USERNAME": "ops"]).http.auth.basic?.username == "ops")
        // Secrets never come from the file.
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.load(yaml: open + "  auth:\n    token: s3cret\n") }
        // Loopback needs none.
        for host in ["127.0.0.1:80", "localhost:80", "[::1]:80", "127.1.2.3:80"] {
            #expect(try DaemonConfiguration.load(yaml: nil, flags: .init(http: host)).http.listen != nil)
        }
    }

    @Test("http.show_positions is off unless set")
    func positions() throws {
        #expect(try DaemonConfiguration.load(yaml: nil).http.showPositions == false)
        #expect(try DaemonConfiguration.load(yaml: "http:\n  show_positions: true\n").http.showPositions == true)
    }

    @Test("devices.forget_after: 30 days by default, a duration beside the devices' own settings, false or 0 never forgets")
    func forgetAfter() throws {
        #expect(try DaemonConfiguration.load(yaml: nil).forgetAfter == .seconds(30 * 86_400))
        let both = try DaemonConfiguration.load(yaml: "devices:\n  forget_after: 12h\n  alice/phone:\n    lang: de\n")
        #expect(both.forgetAfter == .seconds(12 * 3600))
        #expect(both.devices["alice/phone"]?.lang == .de)
        #expect(try DaemonConfiguration.load(yaml: "devices:\n  forget_after: false\n").forgetAfter == nil)
        #expect(try DaemonConfiguration.load(yaml: "devices:\n  forget_after: 0\n").forgetAfter == nil)
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.load(yaml: "devices:\n  forget_after: soon\n") }
    }
}

@Suite("HTTP credentials")
struct HTTPAuthMiddlewareTests {
    @Test("a bearer token or Basic user:password, compared whole; another scheme, a wrong or partial credential is refused")
    func accepts() {
        let token = HTTPAuthMiddleware(auth: .init(token: "t0ken"))
        #expect(token.accepts("Bearer t0ken"))
        #expect(token.accepts("bearer  t0ken "))
        for header in [nil, "", "Bearer", "Bearer t0ke", "Bearer t0kenX", "Basic dDBrZW4=", "Token t0ken"] {
            #expect(!token.accepts(header), "\(header ?? "nil")")
        }
        let basic = HTTPAuthMiddleware(auth: .init(username: "ops", password: "pw:1"))
        let right = Data("ops:pw:1".utf8).base64EncodedString()
        #expect(basic.accepts("Basic \(right)"))
        for header in ["Basic " + Data("ops:pw".utf8).base64EncodedString(), "Basic " + Data("ops:pw:12".utf8).base64EncodedString(),
                       "Basic not-base64!", "Bearer \(right)", "Bearer t0ken"] {
            #expect(!basic.accepts(header), "\(header)")
        }
    }
}
