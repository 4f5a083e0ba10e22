import AmpelMessages
import AmpelMQTT
@testable import AmpelDaemon
import AmpelDomain
import AmpelData
import Foundation
import Testing

/// `outputs.device_state`, `outputs.heartbeat` and `outputs.texts_in_state`: when the engine
/// publishes a device's state and what the states and the texts topics hold.
@Suite("Device state output")
struct DeviceStateOutputTests {
    static let key = "alice/phone"
    static let stateTopic = "ampel/device/alice/phone/state"

    func engine(_ dataset: Dataset = Fixtures.october, outputs: DaemonConfiguration.OutputSettings = .init(),
                ruleSet: RuleSet = Fixtures.ruleSet, restored: PersistedState = .init()) -> (SignalEngine, [SignalEngine.Action]) {
        var settings = Fixtures.settings(discovery: false)
        settings.ruleSet = ruleSet
        settings.outputs = outputs
        var engine = SignalEngine(settings: settings, dataset: dataset, stale: false, restored: restored)
        let start = engine.event(.start)
        return (engine, start)
    }

    func fix(tst: Int, lang: String? = nil, lat: Double = 48.137) -> LocationFix {
        LocationFix(device: Self.key, latitude: lat, longitude: 11.575, tst: tst, lang: lang)
    }

    /// The states published for the device.
    func states(_ actions: [SignalEngine.Action]) -> [OutgoingMessage] { actions.on(Self.stateTopic) }

    @Test("on_change: a state for a first sighting, a phase, a district, a language; none for a fix that changes only the position")
    func publishesOnChange() throws {
        var (engine, _) = engine(Fixtures.november)
        #expect(states(engine.event(.fix(fix(tst: 100), place: Fixtures.muenchen, receivedAt: 1000))).count == 1)
        // Moving within the district: nothing a consumer sees changed.
        for step in 1...5 {
            let moved = engine.event(.fix(fix(tst: 100 + step, lat: 48.137 + Double(step) / 1000), place: Fixtures.muenchen,
                                          receivedAt: 1000 + step))
            #expect(states(moved).isEmpty)
            #expect(moved.steps.contains(.persist(.device(key: Self.key, record: try #require(engine.devices[Self.key])))), "the record still follows every fix")
        }
        // Another district in the same phase (both dark red on 2020-11-05): the district changed.
        let district = engine.event(.fix(fix(tst: 110), place: Fixtures.landkreis, receivedAt: 1010))
        #expect(try district.json(Self.stateTopic)[path: "district", "ags"] as? String == "09184")
        #expect(district.on("ampel/device/alice/phone/alert").isEmpty)
        // The language the device asks for.
        let language = engine.event(.fix(fix(tst: 111, lang: "de"), place: Fixtures.landkreis, receivedAt: 1011))
        #expect(try language.json(Self.stateTopic)["lang"] as? String == "de")
        #expect(states(engine.event(.fix(fix(tst: 112, lang: "de-AT"), place: Fixtures.landkreis, receivedAt: 1012))).isEmpty,
                "de-AT selects the same texts")
        // Another phase: the alert, then the state that witnesses it.
        let phase = engine.event(.fix(fix(tst: 120), place: Fixtures.stuttgart, receivedAt: 1020))
        let kinds = phase.steps.compactMap { action -> SignalEngine.PublishKind? in
            if case .publish(_, let kind) = action { kind } else { nil }
        }
        #expect(kinds == [.deviceAlert, .deviceState])
        #expect(try phase.json(Self.stateTopic)["phase"] as? String == "outside")
        let decision = phase.compactMap { if case .decide(let decision) = $0 { decision } else { nil } }.first
        #expect(decision?.announcement?.witness.kind == .deviceState, "the state witnesses the alert")
    }

    @Test("on_change: new data day and staleness republish the state; the next unchanged fix does not")
    func publishesOnData() throws {
        var (engine, _) = engine()
        _ = engine.event(.fix(fix(tst: 100), place: Fixtures.altoetting, receivedAt: 1000))
        let stale = engine.followingReevaluation(engine.event(.data(Fixtures.october, stale: true))).actions
        #expect(try stale.json(Self.stateTopic)["stale"] as? Bool == true)
        #expect(states(engine.event(.fix(fix(tst: 101), place: Fixtures.altoetting, receivedAt: 1001))).isEmpty)
        let november = engine.followingReevaluation(engine.event(.data(Fixtures.november, stale: false))).actions
        let state = try november.json(Self.stateTopic)
        #expect(state["dataDate"] as? String == "2020-11-05")
        #expect(state["stale"] as? Bool == false)
        #expect(states(engine.event(.fix(fix(tst: 102), place: Fixtures.altoetting, receivedAt: 1002))).isEmpty)
    }

    @Test("on_change: a fix that comes before its device's batch of a walk publishes the new data day or staleness; the batch then finds nothing")
    func fixBeforeItsBatch() throws {
        var settings = Fixtures.settings(discovery: false)
        settings.recoveryBatch = 1
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        _ = engine.followingReevaluation(engine.event(.start))
        let keys = ["a", "b", "c"]
        let fix = { (key: String, tst: Int) in LocationFix(device: key, latitude: 48.2264, longitude: 12.6770, tst: tst) }
        for key in keys { _ = engine.event(.fix(fix(key, 100), place: Fixtures.altoetting, receivedAt: 1000)) }
        let stateKeys = { (actions: [SignalEngine.Action]) in
            actions.published.filter { $0.topic.hasPrefix("ampel/device/") && $0.topic.hasSuffix("/state") }.map { String($0.topic.split(separator: "/")[2]) }
        }
        for (step, data) in [(Fixtures.october, true), (Fixtures.november, true), (Fixtures.november, false)].enumerated() {
            // The walk's first batch reaches one device; the others' fixes come before their batches.
            let first = engine.event(.data(data.0, stale: data.1))
            let reached = stateKeys(first)
            #expect(reached.count == 1, "one device per batch")
            let phaseBefore = engine.devices["a"]?.phase
            var atFix: [String] = []
            for key in keys { atFix += stateKeys(engine.event(.fix(fix(key, 101 + step), place: Fixtures.altoetting, receivedAt: 1001 + step))) }
            #expect(Set(atFix) == Set(keys).subtracting(reached), "each device not yet reached publishes at its fix, within the heartbeat")
            #expect(atFix.count == 2)
            let rest = engine.followingReevaluation([first.last].compactMap { $0 }).actions.dropFirst()
            #expect(stateKeys(Array(rest)).isEmpty, "the batches find nothing left")
            #expect(engine.devices["a"]?.phase == phaseBefore, "Altötting keeps its phase: data day and staleness alone")
        }
    }

    @Test("on_change: the heartbeat republishes an unchanged device once its state is outputs.heartbeat old, never in between")
    func heartbeat() throws {
        var (engine, _) = engine(outputs: .init(deviceState: .onChange, heartbeat: .seconds(60), textsInState: false))
        _ = engine.event(.fix(fix(tst: 0), place: Fixtures.muenchen, receivedAt: 1000))
        var published: [Int] = []
        for second in stride(from: 10, through: 200, by: 10) {
            let actions = engine.event(.fix(fix(tst: second, lat: 48.137 + Double(second) / 100_000), place: Fixtures.muenchen,
                                            receivedAt: 1000 + second))
            if let state = states(actions).last {
                published.append(second)
                let json = try #require(JSONSerialization.jsonObject(with: Data(state.payload)) as? [String: Any])
                #expect(json["tst"] as? Int == second, "the heartbeat carries the latest position and time")
            }
        }
        #expect(published == [60, 120, 180])
        // A change resets the heartbeat: the next one is a full heartbeat after it.
        _ = engine.event(.fix(fix(tst: 205), place: Fixtures.altoetting, receivedAt: 1205))
        #expect(states(engine.event(.fix(fix(tst: 264), place: Fixtures.altoetting, receivedAt: 1264))).isEmpty)
        #expect(states(engine.event(.fix(fix(tst: 265), place: Fixtures.altoetting, receivedAt: 1265))).count == 1)
        // A clock set back does not hold the state back.
        #expect(states(engine.event(.fix(fix(tst: 266), place: Fixtures.altoetting, receivedAt: 900))).count == 1)
    }

    @Test("every_fix: every accepted fix publishes the state")
    func everyFix() {
        var (engine, _) = engine(outputs: .init(deviceState: .everyFix, heartbeat: .seconds(60), textsInState: false))
        for second in 0..<5 {
            #expect(states(engine.event(.fix(fix(tst: second), place: Fixtures.muenchen, receivedAt: 1000 + second))).count == 1)
        }
    }

    @Test("after a restart each device's first fix publishes, under another rule set too")
    func restartPublishesFirstFix() throws {
        var (engine, _) = engine()
        _ = engine.event(.fix(fix(tst: 100), place: Fixtures.muenchen, receivedAt: 1000))
        let initial = try RuleSetCatalog.bundled("bavaria-initial")
        var (restarted, _) = self.engine(ruleSet: initial, restored: engine.persisted)
        let first = restarted.event(.fix(fix(tst: 101), place: Fixtures.muenchen, receivedAt: 1001))
        #expect(try first.json(Self.stateTopic)["ruleSet"] as? String == "bavaria-initial")
        #expect(states(restarted.event(.fix(fix(tst: 102), place: Fixtures.muenchen, receivedAt: 1002))).isEmpty)
    }

    /// An engine restarted on `restored` with `settings` changed by `change`, the last run's
    /// shape `published`; its start with the whole start walk.
    func restart(_ restored: PersistedState, published: PublishedShape?, _ change: (inout SignalEngine.Settings) -> Void = { _ in })
        -> (SignalEngine, [SignalEngine.Action]) {
        var settings = Fixtures.settings(discovery: false)
        change(&settings)
        settings.publishedShape = published
        settings.recoveryBatch = 1
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false, restored: restored)
        let start = engine.followingReevaluation(engine.event(.start)).actions
        return (engine, start)
    }

    func shapesRecorded(_ actions: [SignalEngine.Action]) -> [PublishedShape] {
        actions.compactMap { action in if case .recordShape(let shape) = action { shape } else { nil } }
    }

    @Test("a start in another shape (language, rule set, texts) republishes every device's state, empties old texts topics, then records it; the same shape republishes nothing")
    func restartInAnotherShape() throws {
        var (engine, _) = engine()
        for (index, key) in ["a", "b", "c"].enumerated() {
            _ = engine.event(.fix(LocationFix(device: key, latitude: 48.137, longitude: 11.575, tst: 100 + index), place: Fixtures.muenchen,
                                  receivedAt: 1000))
        }
        let restored = engine.persisted
        let before = engine.currentShape
        #expect(before.texts.contains("ampel/rules/\(Fixtures.ruleSet.id)/red/en"))
        let states = { (actions: [SignalEngine.Action]) in Set(actions.published.map(\.topic).filter { $0.hasSuffix("/state") && $0.hasPrefix("ampel/device/") }) }
        let all: Set = ["ampel/device/a/state", "ampel/device/b/state", "ampel/device/c/state"]

        // The same shape: parked devices keep their states, nothing to record.
        let (_, same) = restart(restored, published: before)
        #expect(states(same).isEmpty)
        #expect(shapesRecorded(same).isEmpty)

        // Another default language: every device in German, without a fix; the record after the walk.
        let (german, inGerman) = restart(restored, published: before) { $0.defaultLanguage = .de }
        #expect(states(inGerman) == all)
        for key in ["a", "b", "c"] {
            #expect(try inGerman.json("ampel/device/\(key)/state")["lang"] as? String == "de")
        }
        #expect(shapesRecorded(inGerman) == [german.currentShape])
        let lastState = try #require(inGerman.steps.lastIndex { if case .publish(let m, .deviceState) = $0 { m.topic == "ampel/device/c/state" || m.topic == "ampel/device/a/state" || m.topic == "ampel/device/b/state" } else { false } })
        let record = try #require(inGerman.steps.firstIndex { if case .other(.recordShape) = $0 { true } else { false } })
        #expect(record > lastState, "recorded after the states it records")
        #expect(inGerman.on("ampel/device/a/alert").isEmpty, "no alert: the phase did not change")

        // One device's configured language.
        let (_, oneDevice) = restart(restored, published: before) { $0.devices = ["b": .init(lang: .de)] }
        #expect(states(oneDevice) == all)
        #expect(try oneDevice.json("ampel/device/b/state")["lang"] as? String == "de")

        // Another rule set: the states name it, the old rule set's texts topics are emptied.
        let initial = try RuleSetCatalog.bundled("bavaria-initial")
        let (_, otherRules) = restart(restored, published: before) { $0.ruleSet = initial }
        #expect(states(otherRules) == all)
        #expect(try otherRules.json("ampel/device/a/state")["ruleSet"] as? String == "bavaria-initial")
        let emptied = otherRules.published.filter { $0.payload.isEmpty && $0.retain }.map(\.topic)
        #expect(emptied.sorted() == before.texts, "each old texts topic emptied once")
        // A partitioned instance without the district topics leaves the shared texts topics to the one with them.
        let (_, partition) = restart(restored, published: before) { $0.ruleSet = initial; $0.publishDistricts = false }
        #expect(states(partition) == all)
        #expect(partition.published.filter { $0.payload.isEmpty && $0.retain }.isEmpty)

        // Another base topic: every state under it.
        let (_, rebased) = restart(restored, published: before) { $0.topics = Topics(base: "signals") }
        #expect(Set(rebased.published.map(\.topic).filter { $0.hasPrefix("signals/device/") && $0.hasSuffix("/state") })
                == ["signals/device/a/state", "signals/device/b/state", "signals/device/c/state"])

        // Texts inline: the states carry them, no texts topic is left.
        let (_, inline) = restart(restored, published: before) { $0.outputs.textsInState = true }
        #expect(states(inline) == all)
        #expect(try inline.json("ampel/device/a/state")["rules"] is [String])
        #expect(Set(inline.published.filter { $0.payload.isEmpty && $0.retain }.map(\.topic)) == Set(before.texts))

        // An earlier release (no record): every state once.
        let (_, upgraded) = restart(restored, published: .unknown)
        #expect(states(upgraded) == all)
        // A first run: nothing to republish, recorded at once.
        let (fresh, first) = restart(PersistedState(), published: .unknown)
        #expect(shapesRecorded(first) == [fresh.currentShape])
    }

    @Test("the texts topics: retained, one per phase and language of every bundled rule set, complete; states name theirs")
    func textsTopics() throws {
        for name in RuleSetCatalog.bundledNames {
            let ruleSet = try RuleSetCatalog.bundled(name)
            // A set of state indicators runs on the bundled hospital data, not on incidences.
            let dataset = ruleSet.readsStateIndicators ? try BundledIndicatorSource(region: ruleSet.region).load() : Fixtures.october
            var (engine, start) = engine(dataset, ruleSet: ruleSet)
            var texts: [String: [String: Any]] = [:]
            for case .publish(let message, let kind) in start.steps where kind == .texts {
                #expect(message.retain && message.qos == .atLeastOnce)
                texts[message.topic] = try #require(JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
            }
            var expected: [String: (title: String, rules: [String])] = [:]
            for language in Language.allCases {
                for phase in ruleSet.phases {
                    expected["ampel/rules/\(name)/\(phase.id.id)/\(language.rawValue)"] = (phase.title(language), phase.rules(language))
                }
                expected["ampel/rules/\(name)/outside/\(language.rawValue)"] = (ruleSet.outside.title(language), ruleSet.outside.rules(language))
            }
            #expect(Set(texts.keys) == Set(expected.keys))
            for (topic, want) in expected {
                let got = try #require(texts[topic])
                let lang = try #require(topic.split(separator: "/").last.map(String.init))
                #expect(got["title"] as? String == want.title)
                #expect(got["rules"] as? [String] == want.rules)
                #expect(got["always"] as? [String] == ruleSet.always(try #require(Language(rawValue: lang))))
                #expect(got["lang"] as? String == lang)
                #expect(got["ruleSet"] as? String == name)
                #expect(got["phase"] as? String == String(topic.split(separator: "/")[3]))
            }
            // The district states and a device's state name a texts topic of their phase and language.
            let district = try start.json("ampel/district/09162/state")
            #expect(district["texts"] as? String == "ampel/rules/\(name)/\(district["phase"] as? String ?? "?")/en")
            #expect(district["title"] == nil && district["rules"] == nil && district["always"] == nil)
            let state = try engine.event(.fix(fix(tst: 1, lang: "de"), place: Fixtures.muenchen, receivedAt: 1)).json(Self.stateTopic)
            #expect(state["texts"] as? String == "ampel/rules/\(name)/\(state["phase"] as? String ?? "?")/de")
            #expect(state["phase"] as? String == (ruleSet.readsStateIndicators ? "green" : "red"), "München in 2026 / on 2020-10-15")
            #expect(Set(state.keys) == ["color", "complete", "dataDate", "device", "district", "incidence", "indicators", "lang", "lat", "lon",
                                        "measuredPhase", "phase", "reason", "ruleSet", "since", "stale", "texts", "trend", "tst"])
            // Again after a reconnect, like every retained topic.
            let again = engine.event(.reconnected).steps.compactMap { action -> String? in
                if case .publish(let message, .texts) = action { message.topic } else { nil }
            }
            #expect(Set(again) == Set(expected.keys))
        }
    }

    @Test("texts_in_state: true gives the payloads of the writer with texts byte for byte, and no texts topics")
    func textsInState() throws {
        var (engine, start) = engine(outputs: .init(deviceState: .everyFix, heartbeat: .seconds(60), textsInState: true))
        #expect(!start.steps.contains { if case .publish(_, .texts) = $0 { true } else { false } })
        let ruleSet = Fixtures.ruleSet
        let signal = try ruleSet.signal(atDistrict: "09162", placeName: "München", dataset: Fixtures.october, region: .bavaria,
                                        language: .de, stale: false)
        let actions = engine.event(.fix(fix(tst: 1000, lang: "de"), place: Fixtures.muenchen, receivedAt: 1000))
        let state = try #require(states(actions).last)
        #expect(state.payload == signal.json(device: .init(device: Self.key, lat: 48.137, lon: 11.575, tst: 1000)))
        let district = try #require(start.on("ampel/district/09162/state").last)
        let entry = try #require(Fixtures.october.districts(in: .bavaria).first { $0.district.ags == "09162" })
        let districtSignal = try ruleSet.signal(for: entry, dataDate: Fixtures.october.date, language: .en, stale: false)
        #expect(district.payload == districtSignal.json())
        let json = try #require(JSONSerialization.jsonObject(with: Data(state.payload)) as? [String: Any])
        #expect(json["texts"] == nil && json["title"] as? String == signal.title)
    }
}

@Suite("The record of the published states' shape")
struct PublishedShapeFileTests {
    @Test("saved and loaded; no file and a garbage file count as unknown, the latter with the reason; shapes differ by rule set, language, texts")
    func file() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-shape-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = PublishedShapeFile(directory: dir)
        #expect(file.published().shape == .unknown)
        #expect(file.published().problem == nil)
        let shape = PublishedShape(base: "ampel", ruleSet: "bavaria", textsInState: false, defaultLanguage: .en, deviceLanguages: ["b": .de, "a": .en],
                                   texts: ["ampel/rules/bavaria/red/en", "ampel/rules/bavaria/green/de"])
        try file.save(shape)
        #expect(file.published().shape == shape)
        #expect(shape.texts == ["ampel/rules/bavaria/green/de", "ampel/rules/bavaria/red/en"])
        #expect(shape == PublishedShape(base: "ampel", ruleSet: "bavaria", textsInState: false, defaultLanguage: .en, deviceLanguages: ["a": .en, "b": .de],
                                        texts: shape.texts), "the order of the device languages does not matter")
        for other in [PublishedShape(base: "ampel", ruleSet: "bavaria-initial", textsInState: false, defaultLanguage: .en, deviceLanguages: ["a": .en, "b": .de], texts: shape.texts),
                      PublishedShape(base: "ampel", ruleSet: "bavaria", textsInState: true, defaultLanguage: .en, deviceLanguages: ["a": .en, "b": .de], texts: shape.texts),
                      PublishedShape(base: "ampel", ruleSet: "bavaria", textsInState: false, defaultLanguage: .de, deviceLanguages: ["a": .en, "b": .de], texts: shape.texts),
                      PublishedShape(base: "ampel", ruleSet: "bavaria", textsInState: false, defaultLanguage: .en, deviceLanguages: ["a": .en], texts: shape.texts),
                      PublishedShape(base: "signals", ruleSet: "bavaria", textsInState: false, defaultLanguage: .en, deviceLanguages: ["a": .en, "b": .de], texts: shape.texts)] {
            #expect(other.fingerprint != shape.fingerprint)
        }
        try Data("{\"shape\":".utf8).write(to: URL(fileURLWithPath: file.path))
        let garbage = file.published()
        #expect(garbage.shape == .unknown)
        #expect(garbage.problem?.contains("outputs.json") == true)
    }
}
