@testable import AmpelDaemon
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Logging
import Testing

/// The daemon in this process, a real mosquitto, real geometry and real RKI data.
///
/// Data: on 2020-10-15 SK München (09162) was red, LK Altötting (09171) green; on 2020-11-05
/// both were dark red.
@Suite("End to end", .serialized)
struct EndToEndTests {
    static let october = ConfigurationOverrides(source: "snapshot", date: "2020-10-15")

    @Test("OwnTracks and plain devices in different districts get the right state; outside Bavaria and Germany is outside")
    func devicesInDistricts() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker)
        let state = temporaryDirectory()
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: state, flags: Self.october, awaiting: recorder)
        defer { daemon.requestStop() }
        let devices = try await Devices.connect(broker)

        // Districts are published at start.
        try await recorder.text("ampel/district/09162/phase", equals: "red")
        try await recorder.text("ampel/district/09171/phase", equals: "green")

        try await devices.owntracks("alice/phone", Places.muenchen.0, Places.muenchen.1, tst: 1_602_750_000)
        try await devices.plain("car", Places.altoetting.0, Places.altoetting.1)
        try await devices.plain("bw", Places.stuttgart.0, Places.stuttgart.1)
        try await devices.plain("paris", Places.paris.0, Places.paris.1)

        let alice = try await recorder.json("ampel/device/alice/phone/state")
        #expect(alice[path: "phase"] as? String == "red")
        #expect(alice[path: "district", "ags"] as? String == "09162")
        #expect(alice[path: "device"] as? String == "alice/phone")
        #expect(alice[path: "tst"] as? Int == 1_602_750_000)
        #expect(alice[path: "dataDate"] as? String == "2020-10-15")
        let car = try await recorder.json("ampel/device/car/state")
        #expect(car[path: "phase"] as? String == "green")
        #expect(car[path: "district", "ags"] as? String == "09171")
        let bw = try await recorder.json("ampel/device/bw/state")
        #expect(bw[path: "phase"] as? String == "outside")
        #expect(bw[path: "district", "ags"] as? String == "08111")
        let paris = try await recorder.json("ampel/device/paris/state")
        #expect(paris[path: "phase"] as? String == "outside")
        #expect(paris["district"] is NSNull)
        // A first sighting is an alert from null.
        let alert = try await recorder.json("ampel/device/alice/phone/alert")
        #expect(alert["from"] is NSNull)
        #expect(alert[path: "to"] as? String == "red")
        // Retained: a subscriber that comes after the fact gets the state, flagged as retained
        // (a live delivery never carries the flag, MQTT 3.1.1 §3.3.1.3).
        let late = try await Recorder.start(broker, filters: ["ampel/device/car/state"])
        let retained = try await late.first("retained car state") { $0.topic == "ampel/device/car/state" }
        #expect(retained.retain)
        // Home Assistant discovery for the device, sent again when Home Assistant restarts.
        try await recorder.first("discovery for car") { $0.topic.hasPrefix("homeassistant/sensor/ampel/device_car") }
        let restart = recorder.mark
        try await devices.send("homeassistant/status", "online")
        try await recorder.first("discovery again", since: restart) { $0.topic == "homeassistant/sensor/ampel/district_09162/config" }
        try await recorder.first("device discovery again", since: restart) { $0.topic.hasPrefix("homeassistant/sensor/ampel/device_car") }

        await late.close()
        await devices.close()
        try await daemon.stop()
        try await recorder.text("ampel/bridge/state", equals: BridgeState.offline)
        await recorder.close()
    }

    @Test("moving across a phase border yields exactly one alert, in the device's language")
    func crossing() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker)
        // Each fix's state marks how far the daemon got.
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: temporaryDirectory(),
                                             yaml: "outputs:\n  device_state: every_fix\n", flags: Self.october, awaiting: recorder)
        defer { daemon.requestStop() }
        let devices = try await Devices.connect(broker)

        try await devices.plain("bob", Places.altoetting.0, Places.altoetting.1, tst: 100, lang: "de")
        try await recorder.json("ampel/device/bob/alert") { $0["to"] as? String == "green" }
        // The alert goes before its state: the mark comes after both.
        try await recorder.json("ampel/device/bob/state") { $0["tst"] as? Int == 100 }
        let mark = recorder.mark
        try await devices.plain("bob", Places.altoetting.0, Places.altoetting.1, tst: 200)
        try await devices.plain("bob", Places.muenchen.0, Places.muenchen.1, tst: 300)
        try await devices.plain("bob", Places.muenchen.0 + 0.001, Places.muenchen.1, tst: 400)
        // The last state is in, and the alert into red: a QoS 2 alert comes before its own state (its
        // witness, QoS 2 too), but a later state at QoS 1 may overtake it. A wrong alert for the fix at
        // 400 would have come before that state, then its witness.
        try await recorder.json("ampel/device/bob/state", since: mark) { $0["tst"] as? Int == 400 }
        try await recorder.json("ampel/device/bob/alert", since: mark) { $0["to"] as? String == "red" }
        // The alert's witness (QoS 2, released after the alert) may still be on its way.
        try await recorder.json("ampel/device/bob/state", since: mark) { $0["tst"] as? Int == 300 }
        let alerts = recorder.messages(on: "ampel/device/bob/alert", since: mark)
        #expect(alerts.count == 1)
        let alert = try #require(alerts.first.flatMap(Recorder.object))
        #expect(alert[path: "from"] as? String == "green")
        #expect(alert[path: "to"] as? String == "red")
        #expect(alert[path: "lang"] as? String == "de")
        #expect((alert[path: "title"] as? String)?.hasPrefix("Rot") == true)
        #expect(recorder.messages(on: "ampel/device/bob/state", since: mark).count == 3)

        await devices.close()
        try await daemon.stop()
        await recorder.close()
    }

    /// The message expiry interval (mosquitto_sub's `%E`, empty for none) of the alert a first
    /// fix in München sends, as an MQTT 5 subscriber receives it, from a daemon with `yaml`.
    func alertExpiry(yaml: String) async throws -> String {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker)
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: temporaryDirectory(), yaml: yaml, flags: Self.october, awaiting: recorder)
        defer { daemon.requestStop() }
        let output = Watched("")
        // Line-buffered: its SUBACK line must arrive while it runs.
        let subscriber = try ChildProcess("/usr/bin/stdbuf",
                                          ["-oL", "/usr/bin/mosquitto_sub", "-d", "-V", "5", "-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "ampel/device/old/alert",
                                           "-F", "expiry=[%E] %t", "-C", "1", "-W", "30"],
                                          output: .read { data in output.update { $0 += String(decoding: data, as: UTF8.self) } },
                                          errors: .sameAsOutput, onExit: { _ in })
        defer { subscriber.signal(SIGKILL) }
        try await withTimeout(.seconds(20), "mosquitto_sub's SUBACK") { await output.wait { $0.contains("SUBACK") } }
        let devices = try await Devices.connect(broker)
        try await devices.plain("old", Places.muenchen.0, Places.muenchen.1)
        // Its line, not the SUBSCRIBE debug line that names the topic too.
        try await withTimeout(.seconds(20), "the alert at mosquitto_sub") { await output.wait { $0.contains("expiry=[") } }
        await devices.close()
        try await daemon.stop()
        await recorder.close()
        let line = try #require(output.value.split(separator: "\n").first { $0.hasSuffix("ampel/device/old/alert") })
        return String(line.dropFirst("expiry=[".count).prefix { $0 != "]" })
    }

    @Test("on MQTT 3.1.1 alerts go out without message expiry; on MQTT 5 with alerts.expiry")
    func mqtt311() async throws {
        #expect(try await alertExpiry(yaml: "mqtt:\n  protocol: 3.1.1\n") == "")
        // The same check sees an expiry where there is one: the broker counts it down from 120 s.
        let v5 = try await alertExpiry(yaml: "alerts:\n  expiry: 2m\n")
        #expect(Int(v5).map { (100...120).contains($0) } == true, "expiry [\(v5)]")
    }

    @Test("bad payloads are counted by reason and change nothing")
    func badPayloads() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker)
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: temporaryDirectory(),
                                             yaml: "inputs:\n  max_payload: 1024\n", flags: Self.october, awaiting: recorder)
        defer { daemon.requestStop() }
        let devices = try await Devices.connect(broker)
        try await devices.plain("car", Places.muenchen.0, Places.muenchen.1, tst: 10)
        // The state follows the alert: after it, nothing more is due for the car.
        try await recorder.json("ampel/device/car/alert")
        try await recorder.json("ampel/device/car/state") { $0["tst"] as? Int == 10 }
        let mark = recorder.mark

        try await devices.send("ampel/location/car", "not json")
        try await devices.send("ampel/location/car", #"{"lat":123,"lon":11}"#)
        try await devices.send("ampel/location/car", #"{"lon":11}"#)
        try await devices.send("ampel/location/car", #"{"lat":48,"lon":11,"pad":""# + String(repeating: "x", count: 2000) + #""}"#)
        try await devices.send("ampel/location/with space", #"{"lat":48,"lon":11}"#)
        try await devices.plain("car", Places.altoetting.0, Places.altoetting.1, tst: 5)
        try await devices.send("owntracks/alice/phone", #"{"_type":"lwt","tst":1}"#)

        // Until all seven are counted: a tick may publish between the last drop and the lwt.
        let info = try await recorder.json("ampel/bridge/info", since: mark) { info in
            (info[path: "counters", "dropped"] as? [String: Int])?.values.reduce(0, +) == 6
                && (info[path: "counters", "skipped"] as? [String: Int])?.values.reduce(0, +) == 1
        }
        #expect(info[path: "counters", "dropped"] as? [String: Int] == [
            "not-json": 1, "invalid-coordinates": 1, "missing-coordinates": 1, "oversized": 1, "unsafe-device-key": 1, "out-of-order": 1,
        ])
        #expect(info[path: "counters", "skipped"] as? [String: Int] == ["lwt": 1])
        #expect(info[path: "devices"] as? Int == 1)
        // Nothing was published for the device or anyone else.
        #expect(recorder.messages(since: mark).filter { $0.topic.hasPrefix("ampel/device/") }.isEmpty)

        await devices.close()
        try await daemon.stop()
        await recorder.close()
    }

    @Test("an unusable lang is ignored (the device keeps its language) and counted; a key with U+202E is refused")
    func hostileFields() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker)
        // Each fix's state shows the language it kept.
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: temporaryDirectory(),
                                             yaml: "outputs:\n  device_state: every_fix\n", flags: Self.october, awaiting: recorder)
        defer { daemon.requestStop() }
        let devices = try await Devices.connect(broker)
        try await devices.plain("car", Places.muenchen.0, Places.muenchen.1, tst: 10, lang: "de")
        let first = try await recorder.json("ampel/device/car/state") { $0["tst"] as? Int == 10 }
        #expect(first["lang"] as? String == "de")
        let mark = recorder.mark
        try await devices.plain("car", Places.muenchen.0, Places.muenchen.1, tst: 20, lang: "fr")
        try await devices.send("ampel/location/car", #"{"lat":48.137,"lon":11.575,"tst":30,"lang":7}"#)
        try await devices.send("ampel/location/alice\u{202E}enohp", #"{"lat":48,"lon":11}"#)
        let last = try await recorder.json("ampel/device/car/state", since: mark) { $0["tst"] as? Int == 30 }
        #expect(last["lang"] as? String == "de", "the device keeps its language")
        let info = try await recorder.json("ampel/bridge/info", since: mark) { info in
            info[path: "counters", "invalidLang"] as? Int == 2 && info[path: "counters", "dropped", "unsafe-device-key"] as? Int == 1
        }
        #expect(info[path: "stateRecovered"] is NSNull)
        // Nothing published for the refused key (the recorder also sees the input topic itself).
        #expect(recorder.messages(since: mark).allSatisfy { $0.topic.hasPrefix("ampel/location/") || !$0.topic.contains("alice") })
        await devices.close()
        try await daemon.stop()
        await recorder.close()
    }

    @Test("a restart keeps state: no duplicate alert, changes still announced, locations sent while down are processed")
    func restart() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker)
        let state = temporaryDirectory()
        var daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: state, flags: Self.october, awaiting: recorder)
        defer { daemon.requestStop() }
        let devices = try await Devices.connect(broker)
        try await devices.plain("dora", Places.muenchen.0, Places.muenchen.1, tst: 100)
        try await recorder.json("ampel/device/dora/alert") { $0["to"] as? String == "red" }
        try await daemon.stop()

        // While the daemon is down: a location into its persistent session.
        try await devices.plain("dora", Places.muenchen.0, Places.muenchen.1, tst: 200)
        try await devices.plain("queued", Places.altoetting.0, Places.altoetting.1, tst: 200)

        let mark = recorder.mark
        daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: state, flags: Self.october, awaiting: recorder)
        try await recorder.json("ampel/device/queued/state", since: mark) { $0["phase"] as? String == "green" }
        try await recorder.json("ampel/device/dora/state", since: mark) { $0["tst"] as? Int == 200 }
        // A sentinel after dora's state: anything the daemon sent for dora came before it.
        try await devices.plain("sentinel", Places.paris.0, Places.paris.1)
        try await recorder.json("ampel/device/sentinel/state", since: mark)
        #expect(recorder.messages(on: "ampel/device/dora/alert", since: mark).isEmpty)
        #expect(recorder.messages(since: mark).filter { $0.topic.hasPrefix("ampel/district/") && $0.topic.hasSuffix("/alert") }.isEmpty)
        try await daemon.stop()

        // New data while down (2020-11-05): the change is announced at the next start, once.
        let second = recorder.mark
        daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: state,
                                         flags: .init(source: "snapshot", date: "2020-11-05"), awaiting: recorder)
        try await recorder.json("ampel/device/dora/alert", since: second) { $0["from"] as? String == "red" && $0["to"] as? String == "darkred" }
        try await recorder.json("ampel/district/09162/alert", since: second) { $0["to"] as? String == "darkred" }
        try await devices.plain("sentinel", Places.paris.0, Places.paris.1)
        try await recorder.json("ampel/device/sentinel/state", since: second)
        #expect(recorder.messages(on: "ampel/device/dora/alert", since: second).count == 1)

        await devices.close()
        try await daemon.stop()
        await recorder.close()
    }

    @Test("the state file is read once, while the configuration is checked, and the daemon starts from that reading")
    func stateReadOnce() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker)
        let directory = temporaryDirectory()
        var state = PersistedState()
        state.devices["kept"] = DeviceRecord(lat: 48.1374, lon: 11.5755, tst: 100, lang: nil,
                                             district: .init(ags: "09162", name: "SK München", state: "Bayern", type: "SK"),
                                             phase: "red", dataDate: "2020-10-15", stale: false)
        try StateStore(directory: directory).save(state)
        // Were the file read again at start, this would stop the daemon with an error.
        let running = try await InProcessDaemon.start(broker: broker, stateDirectory: directory, flags: Self.october) {
            try Data("{not json".utf8).write(to: URL(fileURLWithPath: StateStore(directory: directory).path))
        }
        defer { running.requestStop() }
        let info = try await recorder.json("ampel/bridge/info")
        #expect(info[path: "devices"] as? Int == 1)
        try await running.stop()
        #expect(try StateStore(directory: directory).load().devices["kept"]?.tst == 100)
        await recorder.close()
    }

    @Test("a new RKI publication changes district phases, lamp colours and device alerts")
    func newPublication() async throws {
        let server = try await HTTPFixtureServer.start()
        try server.serve(contentsOf: RecordedRKI.url(day: "2020-10-15"))
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker)
        let yaml = """
        data:
          max_age: 36500d
        lamps:
          - name: city
            driver: wled
            topic: wled/city
            district: "09162"
          - name: car
            driver: tasmota
            topic: carlamp
            device: car
        """
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: temporaryDirectory(), yaml: yaml,
                                             flags: .init(source: "arcgis", url: server.queryURL, refresh: "1"), awaiting: recorder)
        defer { daemon.requestStop() }
        // The first fetch replaces the bundled stand-in with 2020-10-15.
        try await recorder.json("ampel/bridge/info") { $0["dataDate"] as? String == "2020-10-15" && $0["source"] as? String == "arcgis" }
        try await recorder.text("ampel/district/09162/phase", equals: "red")
        try await recorder.text("wled/city/col", equals: "#E3000F")
        let devices = try await Devices.connect(broker)
        try await devices.plain("car", Places.altoetting.0, Places.altoetting.1, tst: 1)
        try await recorder.text("cmnd/carlamp/Color", equals: "#00A651")
        // The first-sighting alert goes with QoS 2: it may come after the lamp's QoS 1 colour.
        try await recorder.json("ampel/device/car/alert") { $0["to"] as? String == "green" }

        let mark = recorder.mark
        try server.serve(contentsOf: RecordedRKI.url(day: "2020-11-05"))
        try await recorder.text("ampel/district/09162/phase", since: mark, equals: "darkred")
        let districtAlert = try await recorder.json("ampel/district/09162/alert", since: mark)
        #expect(districtAlert[path: "from"] as? String == "red")
        try await recorder.text("wled/city/col", since: mark, equals: "#8B0000")
        try await recorder.text("wled/city/api", since: mark, equals: "T=1&FX=1")
        try await recorder.text("cmnd/carlamp/Color", since: mark, equals: "#8B0000")
        // Tasmota blinks for DARK RED (hardware/ZERO-FIRMWARE.md).
        try await recorder.text("cmnd/carlamp/Power", since: mark, equals: "BLINK")
        // A lamp that comes online gets its colour again; WLED's repeats of `online` (after each
        // change of its own state) do not, a return after `offline` does. The daemon handles
        // them in order, so a colour for the repeat would come before the one awaited.
        let online = recorder.mark
        try await devices.send("wled/city/status", "online")
        try await recorder.text("wled/city/col", since: online, equals: "#8B0000")
        let repeats = recorder.mark
        try await devices.send("wled/city/status", "online")
        try await devices.send("wled/city/status", "online")
        try await devices.send("wled/city/status", "offline")
        try await devices.send("wled/city/status", "online")
        try await recorder.text("wled/city/col", since: repeats, equals: "#8B0000")
        // A barrier before counting: a fix sent after the statuses on the same connection is
        // handled after them, so once its state is here every colour for them is too (a colour
        // for a repeat has the same payload and would not show in the wait above). The fix asks
        // for another language, so that its state goes out under `outputs.device_state: on_change`.
        try await devices.plain("car", Places.altoetting.0, Places.altoetting.1, tst: 2, lang: "de")
        try await recorder.json("ampel/device/car/state", since: repeats) { $0["tst"] as? Int == 2 }
        #expect(recorder.messages(on: "wled/city/col", since: repeats).count == 1, "one colour for offline -> online, none for the repeats")
        // Lamp commands are never retained: a subscriber that comes after them gets none. The
        // broker hands a new subscription its retained messages before anything published
        // after the subscribe, so once the sentinel is in, every retained command would be too.
        let late = try await Recorder.start(broker, filters: ["wled/#", "cmnd/#"])
        try await devices.send("cmnd/sentinel", "after the subscribe")
        try await late.first("sentinel") { $0.topic == "cmnd/sentinel" }
        #expect(late.messages(since: 0).filter { $0.retain }.map(\.topic) == [])
        await late.close()
        let alert = try await recorder.json("ampel/device/car/alert", since: mark)
        #expect(alert[path: "from"] as? String == "green")
        #expect(alert[path: "to"] as? String == "darkred")
        #expect(alert[path: "dataDate"] as? String == "2020-11-05")

        await devices.close()
        try await daemon.stop()
        await recorder.close()
        try await server.shutdown()
    }

    @Test("a daemon started before its broker keeps trying and comes online when the broker does")
    func brokerLate() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        await broker.kill()
        let (logger, lines) = LogCapture.make()
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: temporaryDirectory(), flags: Self.october, logger: logger)
        defer { daemon.requestStop() }
        // Wait for the first failed attempt, so the retry is what gets it online.
        for await line in lines where line.contains("cannot connect to the broker") { break }
        try await broker.restart()
        let recorder = try await Recorder.start(broker, filters: ["ampel/bridge/state"])
        try await recorder.first("online") { String(decoding: $0.payload, as: UTF8.self) == BridgeState.online }
        try await daemon.stop()
        await recorder.close()
    }

    @Test("the broker killed and restarted mid-stream loses no QoS 1 location")
    func brokerRestart() async throws {
        let broker = try await MosquittoBroker.start(.init(persistent: true))
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker, filters: ["ampel/device/+/state", "ampel/bridge/#"])
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: temporaryDirectory(), flags: Self.october, awaiting: recorder)
        defer { daemon.requestStop() }
        let devices = try await Devices.connect(broker)
        let count = 40
        // Publishes run concurrently with the kill; each returns when the broker acknowledged,
        // which the client retries across the restart.
        let sender = Task {
            for index in 0..<count {
                try await devices.plain("d\(index)", Places.muenchen.0, Places.muenchen.1, tst: index + 1)
            }
        }
        try await recorder.first("half of the states") { $0.topic == "ampel/device/d\(count / 2)/state" }
        await broker.kill()
        try await broker.restart()
        try await sender.value
        for index in 0..<count {
            try await recorder.json("ampel/device/d\(index)/state", timeout: .seconds(60)) { $0["tst"] as? Int == index + 1 }
        }
        await devices.close()
        try await daemon.stop()
        await recorder.close()
    }

    @Test("a stop while the broker is gone writes the state and ends without waiting for the broker")
    func stopWithoutBroker() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker, filters: ["ampel/device/+/state", "ampel/bridge/#"])
        let directory = temporaryDirectory()
        let (logger, lines) = LogCapture.make()
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: directory, flags: Self.october, logger: logger)
        defer { daemon.requestStop() }
        try await recorder.first("bridge online") {
            $0.topic == "ampel/bridge/state" && String(decoding: $0.payload, as: UTF8.self) == BridgeState.online
        }
        let devices = try await Devices.connect(broker)
        try await devices.plain("car", Places.muenchen.0, Places.muenchen.1, tst: 100)
        try await recorder.json("ampel/device/car/state") { $0["tst"] as? Int == 100 }
        await devices.close()
        await recorder.close()
        await broker.kill()
        // The goodbye publishes (QoS 1) would wait for a reconnect that never comes; the stop
        // gives up on them after the daemon's goodbye timeout (5 s) instead of hanging.
        try await withTimeout(.seconds(30), "daemon stop with the broker gone") { try await daemon.stop() }
        let warned = try await withTimeout(.seconds(30), "the offline warning") {
            for await line in lines where line.contains("could not publish offline state") { return true }
            return false
        }
        #expect(warned)
        let saved = try StateStore(directory: directory).load()
        #expect(saved.devices["car"]?.tst == 100)
    }

    @Test("a stop while the broker is frozen leaves offline retained: the Last Will, not a DISCONNECT that cancels it")
    func stopWithFrozenBroker() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker, filters: ["ampel/bridge/#"])
        let directory = temporaryDirectory()
        let (logger, lines) = LogCapture.make()
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: directory, flags: Self.october, logger: logger)
        defer { daemon.requestStop() }
        try await recorder.first("bridge online") {
            $0.topic == "ampel/bridge/state" && String(decoding: $0.payload, as: UTF8.self) == BridgeState.online
        }
        await recorder.close()
        broker.pause()
        try await withTimeout(.seconds(30), "daemon stop with the broker frozen") { try await daemon.stop() }
        let warned = try await withTimeout(.seconds(30), "the offline warning") {
            for await line in lines where line.contains("could not publish offline state") { return true }
            return false
        }
        #expect(warned)
        broker.resume()
        // The daemon left without DISCONNECT, so the broker fires its Will. mosquitto logs a
        // DISCONNECT as "Client <id> disconnected." and any other end of a connection with a
        // reason ("closed its connection.", "disconnected due to ..."); a goodbye PUBLISH still
        // in the socket would leave offline retained either way, so this line is the proof.
        try await broker.waitForLog("Client ampel ")
        let end = broker.log.first { $0.hasPrefix("Client ampel ") }
        #expect(end != nil && end != "Client ampel disconnected.", "the daemon's connection ended with: \(end ?? "nothing")")
        // What a new subscriber reads is what every lamp and Home Assistant entity will show.
        let checker = try await Recorder.start(broker, filters: ["ampel/bridge/state"])
        try await checker.first("retained bridge state offline") {
            $0.topic == "ampel/bridge/state" && String(decoding: $0.payload, as: UTF8.self) == BridgeState.offline
        }
        await checker.close()
    }
}
