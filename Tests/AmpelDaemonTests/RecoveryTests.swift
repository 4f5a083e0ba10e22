@testable import AmpelDaemon
import AmpelDomain
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Logging
import Testing

/// The broker crashes (SIGKILL) and comes back, with and without persistence: the daemon's
/// client reconnects by itself, and the daemon must say `online` again, put every retained topic
/// back as it was and give the lamps their colours.
@Suite("Recovery after a reconnect", .serialized, .timeLimit(.minutes(5)))
struct RecoveryTests {
    static let yaml = """
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

    /// The retained messages the broker holds now, topic to payload, as a new subscriber gets them.
    static func retained(_ broker: MosquittoBroker, _ devices: Devices) async throws -> [String: [UInt8]] {
        let sentinel = "test/sentinel/\(UUID().uuidString.prefix(8))"
        let fresh = try await Recorder.start(broker, filters: ["ampel/#", "homeassistant/#", "wled/#", "cmnd/#", "owntracks/+/ampel/info", sentinel])
        // The broker hands a new subscription its retained messages before anything published
        // after the subscribe: once the sentinel is in, every retained message is.
        try await devices.send(sentinel, "after the subscribe")
        try await fresh.first("sentinel") { $0.topic == sentinel }
        var held: [String: [UInt8]] = [:]
        for message in fresh.messages() where message.retain { held[message.topic] = message.payload }
        await fresh.close()
        return held
    }

    static func counter(_ info: [String: Any], _ name: String) -> Int { info[path: "counters", name] as? Int ?? 0 }

    @Test("after a broker SIGKILL and restart: online, every retained topic back byte for byte, lamps recoloured",
          arguments: [false, true])
    func brokerCrash(persistent: Bool) async throws {
        let broker = try await MosquittoBroker.start(.init(persistent: persistent))
        defer { broker.stop() }
        let recorder = try await Recorder.start(broker)
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: temporaryDirectory(), yaml: Self.yaml,
                                             flags: EndToEndTests.october, awaiting: recorder)
        defer { daemon.requestStop() }
        let devices = try await Devices.connect(broker)
        try await devices.plain("car", Places.altoetting.0, Places.altoetting.1, tst: 10)
        try await devices.owntracks("alice/phone", Places.muenchen.0, Places.muenchen.1, tst: 20)
        try await devices.plain("bw", Places.stuttgart.0, Places.stuttgart.1, tst: 30, lang: "de")
        try await recorder.json("ampel/device/bw/state")
        try await recorder.text("cmnd/carlamp/Color", equals: "#00A651")
        try await recorder.text("wled/city/col", equals: "#E3000F")

        let before = try await Self.retained(broker, devices)
        #expect(before["ampel/bridge/state"] == Array(BridgeState.online.utf8))
        #expect(before.keys.filter { $0.hasPrefix("ampel/district/") }.count == 2 * 96)
        // The bridge's 3 configs, 3 per district, 2 per device.
        let configs = before.keys.filter { $0.hasPrefix("homeassistant/") }.count
        #expect(configs == 3 + 96 * 3 + 3 * 2)
        for key in ["car", "alice/phone", "bw"] { #expect(before["ampel/device/\(key)/state"] != nil) }
        #expect(before["owntracks/alice/ampel/info"] != nil, "the OwnTracks card, republished like every retained topic")
        // bridge/info follows the counters; everything else must come back as it was.
        var expected = before
        expected["ampel/bridge/info"] = nil
        let lamps = ["wled/city/col": "#E3000F", "wled/city/api": "T=1&FX=0", "cmnd/carlamp/Color": "#00A651", "cmnd/carlamp/Power": "ON"]

        // The lamps' commands are not retained: only a subscriber that is there when the daemon
        // reconnects sees them. It subscribes right after the restart; should the daemon have been
        // quicker (its `online` then reached the watcher only as the retained copy), crash again.
        var watcher: Recorder?
        var crashes = 0
        while watcher == nil && crashes < 3 {
            crashes += 1
            await broker.kill()
            try await broker.restart()
            let candidate = try await Recorder.start(broker)
            // bridge/info goes out after the republishes the count includes (one connection, in
            // order): once it counts them all, they are all at the broker.
            let minimum = expected.count + lamps.count
            let round = crashes
            let info = try await candidate.json("ampel/bridge/info", timeout: .seconds(60)) { info in
                Self.counter(info, "reconnects") >= round && Self.counter(info, "republished") >= round * minimum
            }
            #expect(Self.counter(info, "republished") <= round * minimum)  // each once
            let live = candidate.messages(on: "ampel/bridge/state").contains {
                !$0.retain && String(decoding: $0.payload, as: UTF8.self) == BridgeState.online
            }
            if live { watcher = candidate } else { await candidate.close() }
        }
        let live = try #require(watcher, "the daemon reconnected before a watcher could subscribe, \(crashes) times")
        for (topic, payload) in lamps {
            try await live.text(topic, equals: payload)
        }

        // A new subscriber finds everything again: bridge/state online (not empty, not the Will's
        // offline), districts, devices, discovery, with the same bytes.
        var after = try await Self.retained(broker, devices)
        #expect(after["ampel/bridge/state"] == Array(BridgeState.online.utf8))
        #expect(after.removeValue(forKey: "ampel/bridge/info") != nil)
        #expect(after.keys.sorted() == expected.keys.sorted())
        #expect(after == expected)

        // Live locations still work after the recovery.
        try await devices.plain("car", Places.muenchen.0, Places.muenchen.1, tst: 40)
        try await live.text("cmnd/carlamp/Color", equals: "#E3000F")

        await live.close()
        await devices.close()
        try await daemon.stop()
        await recorder.close()
    }

    /// With more devices than one batch, the recovery goes through the broker-paced batches.
    /// `AMPEL_RECOVERY_DEVICES=100000` measures the figure in docs/topics.md (printed).
    @Test("many devices come back in paced batches, all retained again, while a live location is answered")
    func manyDevices() async throws {
        let count = ProcessInfo.processInfo.environment["AMPEL_RECOVERY_DEVICES"].flatMap(Int.init) ?? 5_000
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let directory = temporaryDirectory()
        var state = PersistedState()
        let district = Signal.DistrictRef(ags: "09162", name: "SK München", state: "Bayern", type: "SK")
        for index in 0..<count {
            state.devices["d\(index)"] = DeviceRecord(lat: 48.1374, lon: 11.5755, tst: 100 + index, lang: nil, district: district,
                                                     phase: "red", dataDate: "2020-10-15", stale: false)
        }
        try StateStore(directory: directory).save(state)
        let recorder = try await Recorder.start(broker, filters: ["ampel/bridge/#"])
        let daemon = try await InProcessDaemon.start(broker: broker, stateDirectory: directory, flags: EndToEndTests.october, awaiting: recorder)
        defer { daemon.requestStop() }
        let devices = try await Devices.connect(broker)
        await recorder.close()

        let clock = ContinuousClock()
        await broker.kill()
        try await broker.restart()
        let restarted = clock.now
        let watcher = try await Recorder.start(broker, filters: ["ampel/bridge/info", "ampel/device/live/state"])
        try await watcher.json("ampel/bridge/info", timeout: .seconds(60)) { Self.counter($0, "reconnects") >= 1 }
        let sent = clock.now
        try await devices.plain("live", Places.altoetting.0, Places.altoetting.1, tst: 1)
        try await watcher.json("ampel/device/live/state") { $0["phase"] as? String == "green" }
        let answered = clock.now
        // online, 96 district states and phases, the bridge's 3 and the districts' 3 * 96
        // discovery configs, then per device its 2 discovery configs and its state.
        let total = 1 + 2 * 96 + 3 + 3 * 96 + 3 * count
        try await watcher.json("ampel/bridge/info", timeout: .seconds(120)) { Self.counter($0, "republished") >= total }
        let done = clock.now
        print("recovery of \(count) devices: all handed over \(done - restarted) after the restart; a live location answered in \(answered - sent)")

        let sentinel = "test/sentinel"
        let fresh = try await Recorder.start(broker, filters: ["ampel/device/+/state", sentinel])
        try await devices.send(sentinel, "after the subscribe")
        try await fresh.first("sentinel", timeout: .seconds(60)) { $0.topic == sentinel }
        let retained = Set(fresh.messages().filter { $0.retain && $0.topic.hasPrefix("ampel/device/d") }.map(\.topic))
        #expect(retained.count == count)
        print("recovery of \(count) devices: every state retained again \(clock.now - restarted) after the restart")

        await fresh.close()
        await watcher.close()
        await devices.close()
        try await daemon.stop()
    }
}
