@testable import AmpelDaemon
import AmpelDomain
import AmpelMQTT
import Foundation
import Testing

/// Rebuilding the engine's memory from the broker's retained topics after a lost state file:
/// the parse of what the daemon itself published and the merge into the engine. Pure, no broker.
@Suite("Rebuild from retained states")
struct RebuildTests {
    func fix(_ device: String, _ lat: Double = 48.137, _ lon: Double = 11.575, tst: Int = 1000, lang: String? = nil) -> LocationFix {
        LocationFix(device: device, latitude: lat, longitude: lon, tst: tst, lang: lang)
    }

    func engine(restored: PersistedState = .init(), settings: SignalEngine.Settings = Fixtures.settings()) -> SignalEngine {
        SignalEngine(settings: settings, dataset: Fixtures.october, stale: false, restored: restored)
    }

    /// What a broker would hold after these fixes: the last retained message per topic.
    func retained(after fixes: [(LocationFix, Signal.DistrictRef?)], settings: SignalEngine.Settings = Fixtures.settings()) -> (SignalEngine, [String: [UInt8]]) {
        var engine = engine(settings: settings)
        var retained: [String: [UInt8]] = [:]
        for case .publish(let message, _) in engine.event(.start).steps where message.retain { retained[message.topic] = message.payload }
        for (fix, place) in fixes {
            for case .publish(let message, _) in engine.event(.fix(fix, place: place, receivedAt: 0)).steps where message.retain {
                retained[message.topic] = message.payload
            }
        }
        return (engine, retained)
    }

    /// Every retained message read back as ``RetainedStates`` does: device states and district phases.
    func read(_ retained: [String: [UInt8]], topics: Topics = Topics()) throws -> (devices: DeviceTable, districts: [String: String]) {
        var devices = DeviceTable()
        var districts: [String: String] = [:]
        for (topic, payload) in retained {
            if let key = topics.deviceKey(stateTopic: topic) {
                devices[key] = try RetainedState.device(key: key, payload: payload).get()
            } else if let ags = topics.districtCode(phaseTopic: topic) {
                districts[ags] = try RetainedState.districtPhase(payload: payload).get()
            }
        }
        return (devices, districts)
    }

    static let fleet: [(LocationFix, Signal.DistrictRef?)] = [
        (LocationFix(device: "alice/phone", latitude: 48.137, longitude: 11.575, tst: 1000), Fixtures.muenchen),
        (LocationFix(device: "bob", latitude: 48.226, longitude: 12.677, tst: 1001, lang: "de-AT"), Fixtures.altoetting),
        (LocationFix(device: "carol", latitude: 48.249, longitude: 11.653, tst: 1002), Fixtures.landkreis),
        (LocationFix(device: "dave", latitude: 48.776, longitude: 9.183, tst: 1003), Fixtures.stuttgart),
        (LocationFix(device: "erin", latitude: 48.85, longitude: 2.35, tst: 1004), nil),
        (LocationFix(device: "東京/phone", latitude: 48.137, longitude: 11.575, tst: 1005, lang: "de"), Fixtures.muenchen),
    ]

    @Test("the states the engine published read back into the very records it held; no alert at start, none for the same phase, the right one for a move")
    func roundTrip() throws {
        let (before, retained) = retained(after: Self.fleet)
        let found = try read(retained)
        #expect(found.devices.count == Self.fleet.count)
        let districts = Fixtures.october.districts(in: .bavaria).count
        #expect(found.districts.count == districts)

        var after = engine()
        let restore = after.event(.restore(devices: found.devices, districts: found.districts))
        // Everything is persisted, nothing is announced.
        #expect(restore.count == Self.fleet.count + districts)
        #expect(restore.allSatisfy { if case .decide(let decision) = $0 { decision.announcement == nil } else { false } })
        #expect(after.devices == before.devices, "\(after.devices.records) != \(before.devices.records)")
        #expect(after.districtPhases == before.districtPhases)

        let start = after.event(.start)
        #expect(!start.topics.contains { $0.hasSuffix("/alert") })
        #expect(!start.topics.contains { $0.hasPrefix("ampel/device/") }, "the data did not change: no device state again")
        for (fix, place) in Self.fleet {
            var again = fix
            again.tst = fix.tst.map { $0 + 100 }
            let actions = after.event(.fix(again, place: place, receivedAt: 0))
            #expect(!actions.topics.contains { $0.hasSuffix("/alert") }, "\(fix.device)")
        }
        let moved = after.event(.fix(fix("bob", tst: 2000), place: Fixtures.muenchen, receivedAt: 0))
        #expect(moved.on("ampel/device/bob/alert").count == 1)
        let alert = try moved.json("ampel/device/bob/alert")
        #expect(alert["from"] as? String == "green")
        #expect(alert["to"] as? String == "red")
        // bob asked for German: the rebuilt record kept it.
        #expect(alert["lang"] as? String == "de")
    }

    @Test("a restored device keeps the language it asked for, and one that asked for nothing follows the default and its configuration")
    func languages() throws {
        let settings = Fixtures.settings(devices: ["cfg": .init(lang: .de)], language: .en)
        let (_, retained) = retained(after: [(fix("cfg"), Fixtures.muenchen), (fix("plain"), Fixtures.muenchen),
                                             (fix("asked", lang: "de"), Fixtures.muenchen)], settings: settings)
        var after = engine(settings: settings)
        _ = after.event(.restore(devices: try read(retained).devices, districts: [:]))
        // A device that was never restored has no language either: each must be there first.
        let cfg = try #require(after.devices["cfg"]), plain = try #require(after.devices["plain"])
        let asked = try #require(after.devices["asked"])
        #expect(cfg.lang == nil)
        #expect(plain.lang == nil)
        #expect(asked.lang == "de")
        // The language shows in the alert of a move: the configuration's, the default, the asked one.
        for (device, lang) in [("cfg", "de"), ("plain", "en"), ("asked", "de")] {
            let moved = after.event(.fix(fix(device, 48.2264, 12.6770, tst: 2000), place: Fixtures.altoetting, receivedAt: 0))
            let alert = try moved.json("ampel/device/\(device)/alert")
            #expect(alert["from"] as? String == "red" && alert["to"] as? String == "green", "\(device): \(alert)")
            #expect(alert["lang"] as? String == lang, "\(device): \(alert)")
        }
    }

    @Test("what the journal restored wins; the broker fills only devices and districts of the region that the engine does not know")
    func journalWins() throws {
        let journal = DeviceRecord(lat: 48.226, lon: 12.677, tst: 3000, lang: nil,
                                   district: .init(ags: "09171", name: "LK Altötting", state: "Bayern", type: "LK"),
                                   phase: "green", dataDate: "2020-10-15", stale: false)
        var older = journal
        older.phase = "red"
        older.tst = 2000
        let newcomer = DeviceRecord(lat: 48.249, lon: 11.653, tst: 1000, lang: nil,
                                    district: .init(ags: "09184", name: "LK München", state: "Bayern", type: "LK"),
                                    phase: "yellow", dataDate: "2020-10-15", stale: false)
        var engine = engine(restored: PersistedState(devices: ["alice": journal], districts: ["09162": "red"]))
        let actions = engine.event(.restore(devices: ["alice": older, "bob": newcomer],
                                            districts: ["09162": "green", "09171": "yellow", "08111": "red"]))
        #expect(actions == [.decide(Decision(.device(key: "bob", record: newcomer))), .decide(Decision(.district(ags: "09171", phase: "yellow")))])
        #expect(engine.devices["alice"] == journal)
        #expect(engine.devices["bob"] == newcomer)
        #expect(engine.districtPhases == ["09162": "red", "09171": "yellow"])

        // A district rebuilt in another phase than the data's now is a change, announced at start.
        let start = engine.event(.start)
        let alert = try start.json("ampel/district/09171/alert")
        #expect(alert["from"] as? String == "yellow")
        #expect(alert["to"] as? String == "green")
        // Once started the engine takes nothing more from the broker.
        #expect(engine.event(.restore(devices: ["carol": newcomer], districts: [:])).isEmpty)
        #expect(engine.devices["carol"] == nil)
    }

    @Test("device keys come from state topics only, under the configured base, as the daemon writes them")
    func topics() {
        let topics = Topics()
        #expect(topics.deviceKey(stateTopic: "ampel/device/alice/state") == "alice")
        #expect(topics.deviceKey(stateTopic: "ampel/device/alice/phone/state") == "alice/phone")
        #expect(topics.deviceKey(stateTopic: "ampel/device/x/state/state") == "x/state")
        #expect(topics.deviceKey(stateTopic: "ampel/device/jörg/state") == "jörg")
        for topic in ["ampel/device/state", "ampel/device//state", "ampel/device/alice/alert", "ampel/device/a//b/state",
                      "ampel/device/a b/state", "ampel/device/$x/state", "other/device/alice/state", "ampel/district/09162/state",
                      "ampel/device/alice\u{202E}/state", "ampel/device/alice/state/"] {
            #expect(topics.deviceKey(stateTopic: topic) == nil, "\(topic)")
        }
        let city = Topics(base: "city/ampel")
        #expect(city.deviceKey(stateTopic: "city/ampel/device/alice/state") == "alice")
        #expect(city.deviceKey(stateTopic: "ampel/device/alice/state") == nil)
        #expect(topics.districtCode(phaseTopic: "ampel/district/09162/phase") == "09162")
        #expect(topics.districtCode(phaseTopic: "ampel/district/09162/state") == nil)
        #expect(topics.districtCode(phaseTopic: "ampel/district/x/phase") == nil)
        #expect(topics.districtCode(phaseTopic: "ampel/district//phase") == nil)
    }

    @Test("the topics the daemon writes read back to the key and code they were built from, and match the read's filters")
    func topicsRoundTrip() throws {
        for topics in [Topics(), Topics(base: "city/ampel")] {
            let devices = try MQTTTopicFilter(topics.devicesFilter), phases = try MQTTTopicFilter(topics.districtPhasesFilter)
            for key in ["alice", "alice/phone", "x/state", "jörg", "a/b/c"] {
                #expect(topics.deviceKey(stateTopic: topics.deviceState(key)) == key)
                #expect(topics.deviceKey(stateTopic: topics.deviceAlert(key)) == nil)
                #expect(devices.matches(topics.deviceState(key)))
                #expect(topics.isDeviceOrDistrictTopic(topics.deviceState(key)))
            }
            for ags in ["09162", "09780"] {
                #expect(topics.districtCode(phaseTopic: topics.districtPhase(ags)) == ags)
                #expect(topics.districtCode(phaseTopic: topics.districtState(ags)) == nil)
                #expect(phases.matches(topics.districtPhase(ags)) && !phases.matches(topics.districtState(ags)))
                #expect(topics.isDeviceOrDistrictTopic(topics.districtAlert(ags)))
            }
            #expect(!topics.isDeviceOrDistrictTopic(topics.bridgeInfo))
            let witnesses = topics.probe(clientID: "ampel-1"), states = topics.probe(clientID: "ampel-1", purpose: "states")
            #expect(witnesses != states && witnesses.hasPrefix(topics.base + "/bridge/"))
            #expect(!devices.matches(witnesses) && !devices.matches(states))
        }
    }

    @Test("payloads that are no state the daemon writes are refused with a reason, never taken in part")
    func rejections() throws {
        let (_, retained) = retained(after: [(fix("alice"), Fixtures.muenchen)])
        let good = try #require(retained["ampel/device/alice/state"])
        var object = try #require(try JSONSerialization.jsonObject(with: Data(good)) as? [String: Any])
        func payload(_ change: (inout [String: Any]) -> Void) throws -> [UInt8] {
            var copy = object
            change(&copy)
            return Array(try JSONSerialization.data(withJSONObject: copy))
        }
        let bad: [(String, [UInt8])] = [
            ("empty", []),
            ("garbage", Array("\u{0}not json".utf8)),
            ("an array", Array("[1,2]".utf8)),
            ("cut short", Array(good.prefix(good.count / 2))),
            ("another device", try payload { $0["device"] = "bob" }),
            ("no device", try payload { $0["device"] = nil }),
            ("no phase", try payload { $0["phase"] = nil }),
            ("an unknown phase", try payload { $0["phase"] = "purple" }),
            ("a phase without a district", try payload { $0["district"] = NSNull() }),
            ("latitude out of range", try payload { $0["lat"] = 91 }),
            ("a string for a number", try payload { $0["lon"] = "11.5" }),
            ("a negative tst", try payload { $0["tst"] = -1 }),
            ("a fractional tst", try payload { $0["tst"] = 1.5 }),
            ("no day", try payload { $0["dataDate"] = "yesterday" }),
            ("a district without its name", try payload { $0["district"] = ["ags": "09162"] }),
            ("too long", good + Array(repeating: 0x20, count: RetainedState.maximumPayload)),
        ]
        for (what, bytes) in bad {
            guard case .failure(let rejection) = RetainedState.device(key: "alice", payload: bytes) else {
                Issue.record("\(what) was taken")
                continue
            }
            #expect(!rejection.reason.isEmpty)
        }
        // Another language, an unknown one, and white space are fine: the record is the same.
        #expect(try RetainedState.device(key: "alice", payload: try payload { $0["lang"] = "klingon" }).get().lang == nil)
        object["lang"] = "de"
        #expect(try RetainedState.device(key: "alice", payload: try payload { _ in }).get().lang == "de")
        #expect(try RetainedState.device(key: "alice", payload: Array(" \n".utf8) + good + Array("\n".utf8)).get() ==
            RetainedState.device(key: "alice", payload: good).get())

        #expect(try RetainedState.districtPhase(payload: Array("darkred".utf8)).get() == "darkred")
        for text in ["outside", "Red", "red\n", "", "\u{0}"] {
            #expect((try? RetainedState.districtPhase(payload: Array(text.utf8)).get()) == nil, "\(text)")
        }
        #expect(RetainedState.bridgeDevices(payload: Array(#"{"counters":{},"devices":100000,"version":"0.1.0"}"#.utf8)) == 100_000)
        for text in [#"{"devices":-1}"#, #"{"devices":1.5}"#, #"{"devices":"3"}"#, "[]", "online"] {
            #expect(RetainedState.bridgeDevices(payload: Array(text.utf8)) == nil, "\(text)")
        }
    }

    @Test("any mangling of a state payload is refused or read, never a crash")
    func mangled() throws {
        let (_, retained) = retained(after: [(fix("alice/phone"), Fixtures.muenchen)])
        let good = try #require(retained["ampel/device/alice/phone/state"])
        var generator = SystemRandomNumberGenerator()
        var taken = 0
        for _ in 0..<3000 {
            var bytes = good
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[index] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes.remove(at: index)
                default: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: index)
                }
            }
            if case .success = RetainedState.device(key: "alice/phone", payload: bytes) { taken += 1 }
        }
        #expect(taken < 3000)
    }

    @Test("a state file that is missing counts as lost only when the journal shows that a snapshot covered its beginning")
    func lostSnapshot() {
        var replay = JournalReplay(state: PersistedState())
        #expect(AmpelDaemon.lostSnapshot(PersistedState(), replay: replay) == nil, "a first start")
        replay.segments = [1: 10, 2: 20]
        #expect(AmpelDaemon.lostSnapshot(PersistedState(), replay: replay) == nil, "a first run that never took a snapshot")
        replay.segments = [7: 10, 8: 0]
        #expect(AmpelDaemon.lostSnapshot(PersistedState(), replay: replay)?.contains("segment 7") == true)
        #expect(AmpelDaemon.lostSnapshot(PersistedState(journal: JournalMark(segment: 7)), replay: replay) == nil, "the snapshot is there")
    }
}
