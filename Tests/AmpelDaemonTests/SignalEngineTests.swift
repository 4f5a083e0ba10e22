import AmpelMQTT
@testable import AmpelDaemon
import AmpelCore
import AmpelData
import AmpelDomain
import AmpelMessages
import Foundation
import Testing

/// Real bundled data: on 2020-10-15 SK München (09162) was red (54.6), LK München (09184)
/// yellow (38.5), Altötting (09171) green (4.5); on 2020-11-05 all three were dark red.
enum Fixtures {
    static let october = try! BundledData.shared.snapshot(on: Day(iso: "2020-10-15"))
    static let november = try! BundledData.shared.snapshot(on: Day(iso: "2020-11-05"))
    static let ruleSet = RuleSetCatalog.standard()

    static func settings(lamps: [LampSettings] = [], discovery: Bool = true, devices: [String: DaemonConfiguration.DeviceSettings] = [:],
                         language: Language = .en, owntracks: OwnTracksNotices? = nil) -> SignalEngine.Settings {
        let topics = Topics()
        return SignalEngine.Settings(
            ruleSet: ruleSet, topics: topics, defaultLanguage: language, devices: devices, alertExpiry: .seconds(3600), lamps: lamps,
            discovery: discovery ? Discovery(prefix: "homeassistant", topics: topics, version: "test", ruleSet: ruleSet) : nil,
            owntracks: owntracks)
    }

    static let muenchen = place("09162", "München")
    static let landkreis = place("09184", "München")
    static let altoetting = place("09171", "Altötting")
    static let stuttgart = place("08111", "Stuttgart")

    /// A district as the geometry locator gives it.
    static func place(_ ags: String, _ name: String) -> Signal.DistrictRef {
        GeoLocator.district(ags: ags, name: name)
    }
}

/// One step of carrying out the engine's actions, as ``ActionExecutor`` takes them: a decision
/// is its journal write (`persist`), its announcements, its webhooks, its retained publishes and
/// its witness, in that order.
enum ActionStep: Hashable {
    case persist(SignalEngine.Change)
    case publish(OutgoingMessage, kind: SignalEngine.PublishKind)
    case notify(webhook: Int, payload: [UInt8])
    case other(SignalEngine.Action)
}

extension [SignalEngine.Action] {
    var steps: [ActionStep] {
        flatMap { action -> [ActionStep] in
            switch action {
            case .decide(let decision):
                var steps: [ActionStep] = [.persist(decision.change)]
                if let announcement = decision.announcement {
                    steps += announcement.messages.map { .publish($0.message, kind: $0.kind) }
                    // Home Assistant's copy of the alert, at once for a known device (a new one's comes later).
                    if let event = announcement.homeAssistant, event.delay == .zero, let alert = announcement.messages.first {
                        var copy = alert.message
                        copy.topic = event.topic
                        steps.append(.publish(copy, kind: .homeAssistantEvent))
                    }
                    steps += announcement.notifications.map { .notify(webhook: $0.webhook, payload: $0.payload) }
                    steps += (announcement.retained + [announcement.witness]).map { .publish($0.message, kind: $0.kind) }
                }
                return steps
            case .publish(let message, let kind):
                return [.publish(message, kind: kind)]
            default:
                return [.other(action)]
            }
        }
    }

    var published: [OutgoingMessage] {
        steps.compactMap { if case .publish(let m, _) = $0 { m } else { nil } }
    }

    func on(_ topic: String) -> [OutgoingMessage] { published.filter { $0.topic == topic } }

    func json(_ topic: String) throws -> [String: Any] {
        let message = try #require(on(topic).last)
        return try #require(JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
    }

    var topics: [String] { published.map(\.topic) }
}

extension SignalEngine {
    /// `actions` and every batch a re-evaluation after new data asks for, as the daemon would
    /// feed them back; `batches` counts the events (1 when it fit in one).
    mutating func followingReevaluation(_ actions: [Action]) -> (actions: [Action], batches: Int) {
        var all = actions
        var batches = 1
        var last = actions
        while case .continueReevaluation(let generation)? = last.last {
            last = event(.reevaluateDevices(generation: generation))
            all += last
            batches += 1
        }
        return (all, batches)
    }
}

@Suite("Signal engine")
struct SignalEngineTests {
    func fix(_ device: String = "alice/phone", _ lat: Double = 48.137, _ lon: Double = 11.575, tst: Int? = 1000, lang: String? = nil) -> LocationFix {
        LocationFix(device: device, latitude: lat, longitude: lon, tst: tst, lang: lang)
    }

    func started(_ dataset: Dataset = Fixtures.october, settings: SignalEngine.Settings = Fixtures.settings(), restored: PersistedState = .init()) -> (SignalEngine, [SignalEngine.Action]) {
        var engine = SignalEngine(settings: settings, dataset: dataset, stale: false, restored: restored)
        let actions = engine.event(.start)
        return (engine, actions)
    }

    @Test("outputs.districts off: no district topic, district alert or bridge and district discovery, at start, on new data and after a reconnect; devices as usual")
    func partitionWithoutDistricts() throws {
        var settings = Fixtures.settings()
        settings.topics = Topics(base: "ampel", bridge: "ampel/bridge/fleet-b")
        settings.discovery = Discovery(prefix: "homeassistant", topics: settings.topics, version: "test", ruleSet: Fixtures.ruleSet)
        settings.publishDistricts = false
        let districtOrBridgeDiscovery: (String) -> Bool = { topic in
            topic.hasPrefix("ampel/district/") || (topic.hasPrefix("homeassistant/") && !topic.contains("device"))
        }
        var (engine, actions) = started(settings: settings)
        #expect(!actions.topics.contains(where: districtOrBridgeDiscovery), "\(actions.topics.filter(districtOrBridgeDiscovery).prefix(3))")
        let fix = engine.event(.fix(fix(), place: Fixtures.muenchen, receivedAt: 1000))
        #expect(fix.topics.contains("ampel/device/alice/phone/state"))
        #expect(fix.topics.contains { $0.hasPrefix("homeassistant/") }, "the instance's own devices are still announced")
        let november = engine.followingReevaluation(engine.event(.data(Fixtures.november, stale: false))).actions
        #expect(november.topics.contains("ampel/device/alice/phone/alert"))
        #expect(!november.topics.contains(where: districtOrBridgeDiscovery))
        let reconnected = engine.event(.reconnected)
        #expect(reconnected.topics.first == "ampel/bridge/fleet-b/state")
        #expect(!reconnected.topics.contains(where: districtOrBridgeDiscovery))
        // The same engine with the districts on publishes them: the filter above sees them.
        let (_, withDistricts) = started()
        #expect(withDistricts.topics.contains(where: districtOrBridgeDiscovery))
    }

    @Test("the data in force reported again (a check answered 304) does nothing; new staleness or data does")
    func sameDataAgain() throws {
        var (engine, _) = started()
        _ = engine.event(.fix(fix(), place: Fixtures.muenchen, receivedAt: 1000))
        #expect(engine.event(.data(Fixtures.october, stale: false)).isEmpty)
        let stale = engine.followingReevaluation(engine.event(.data(Fixtures.october, stale: true))).actions
        #expect(stale.topics.contains("ampel/device/alice/phone/state"))
        #expect(engine.event(.data(Fixtures.october, stale: true)).isEmpty)
        let november = engine.followingReevaluation(engine.event(.data(Fixtures.november, stale: true))).actions
        #expect(november.topics.contains("ampel/device/alice/phone/alert"))
    }

    @Test("start publishes state and phase of every Bavarian district, retained, and no district alert on a fresh start")
    func start() throws {
        let (_, actions) = started()
        let states = actions.published.filter { $0.topic.hasSuffix("/state") && $0.topic.hasPrefix("ampel/district/") }
        let phases = actions.published.filter { $0.topic.hasSuffix("/phase") }
        #expect(states.count == 96)
        #expect(phases.count == 96)
        #expect(states.allSatisfy { $0.retain && $0.qos == .atLeastOnce })
        #expect(actions.on("ampel/district/09162/phase").first?.text == "red")
        #expect(actions.on("ampel/district/09184/phase").first?.text == "yellow")
        #expect(actions.on("ampel/district/09171/phase").first?.text == "green")
        #expect(!actions.topics.contains { $0.hasSuffix("/alert") })
        let state = try actions.json("ampel/district/09162/state")
        #expect(state["phase"] as? String == "red")
        #expect(state["dataDate"] as? String == "2020-10-15")
        #expect((state["district"] as? [String: Any])?["name"] as? String == "SK München")
        // Discovery for every district: phase and incidence sensors, alert event.
        #expect(actions.topics.filter { $0.hasPrefix("homeassistant/sensor/ampel/district_") && !$0.hasSuffix("_incidence/config") }.count == 96)
        #expect(actions.topics.filter { $0.hasSuffix("_incidence/config") }.count == 96)
        #expect(actions.topics.filter { $0.hasPrefix("homeassistant/event/ampel/district_") }.count == 96)
    }

    @Test("a first sighting publishes the state and an alert from null; the same phase again nothing (on_change), only the state with every_fix")
    func firstSighting() throws {
        var (engine, _) = started()
        let first = engine.event(.fix(fix(), place: Fixtures.muenchen, receivedAt: 5000))
        #expect(first.topics == ["homeassistant/sensor/ampel/device_\(DeviceKey.objectID("alice/phone"))/config",
                                 "homeassistant/event/ampel/device_\(DeviceKey.objectID("alice/phone"))/config",
                                 "ampel/device/alice/phone/alert", "ampel/device/alice/phone/state"])
        let steps = first.steps
        let persisted = steps.firstIndex(of: .persist(.device(key: "alice/phone", record: engine.devices["alice/phone"]!)))
        let announced = steps.firstIndex { if case .publish(_, .deviceAlert) = $0 { true } else { false } }
        #expect(persisted != nil && announced != nil && persisted! < announced!, "the decision before its alert")
        let state = try first.json("ampel/device/alice/phone/state")
        #expect(state["phase"] as? String == "red")
        #expect(state["device"] as? String == "alice/phone")
        #expect(state["lat"] as? Double == 48.137)
        #expect(state["lon"] as? Double == 11.575)
        #expect(state["tst"] as? Int == 1000)
        #expect(state["stale"] as? Bool == false)
        #expect(state["ruleSet"] as? String == "bavaria")
        let alert = try first.json("ampel/device/alice/phone/alert")
        #expect(alert["from"] is NSNull)
        #expect(alert["to"] as? String == "red")
        #expect(Set(alert.keys) == ["device", "from", "to", "district", "incidence", "indicators", "dataDate", "lang", "title", "reason", "rules", "always",
                                 "message", "priority"])
        // The one line a push service shows: who, where, what.
        #expect(alert["message"] as? String == "alice/phone – SK München – \(alert["title"] as? String ?? "")")
        #expect(alert["priority"] as? Int == 7)
        let alertMessage = try #require(first.on("ampel/device/alice/phone/alert").first)
        #expect(!alertMessage.retain && alertMessage.qos == .atLeastOnce && alertMessage.expiry == .seconds(3600))

        let again = engine.event(.fix(fix(tst: 1010), place: Fixtures.muenchen, receivedAt: 5010))
        #expect(again.topics == [])
        #expect(engine.devices["alice/phone"]?.tst == 1010)

        var everyFix = Fixtures.settings()
        everyFix.outputs.deviceState = .everyFix
        var (each, _) = started(settings: everyFix)
        _ = each.event(.fix(fix(), place: Fixtures.muenchen, receivedAt: 5000))
        let eachAgain = each.event(.fix(fix(tst: 1010), place: Fixtures.muenchen, receivedAt: 5010))
        #expect(eachAgain.topics == ["ampel/device/alice/phone/state"])
        #expect(try eachAgain.json("ampel/device/alice/phone/state")["tst"] as? Int == 1010)
    }

    @Test("crossing a phase border yields exactly one alert, in the device's language")
    func crossing() throws {
        var (engine, _) = started()
        _ = engine.event(.fix(fix(lang: "de"), place: Fixtures.altoetting, receivedAt: 0))
        let moved = engine.event(.fix(fix(tst: 2000), place: Fixtures.muenchen, receivedAt: 0))
        let alerts = moved.published.filter { $0.topic.hasSuffix("/alert") }
        #expect(alerts.count == 1)
        let alert = try moved.json("ampel/device/alice/phone/alert")
        #expect(alert["from"] as? String == "green")
        #expect(alert["to"] as? String == "red")
        // The language the device asked for earlier still holds.
        #expect(alert["lang"] as? String == "de")
        #expect((alert["title"] as? String)?.hasPrefix("Rot") == true)
        let stay = engine.event(.fix(fix(tst: 2100), place: Fixtures.muenchen, receivedAt: 0))
        #expect(!stay.topics.contains { $0.hasSuffix("/alert") })
    }

    @Test("device language: config first, then the message, then the default")
    func languages() throws {
        var (engine, _) = started(settings: Fixtures.settings(devices: ["cfg": .init(lang: .de)], language: .en))
        let configured = engine.event(.fix(fix("cfg", lang: "en"), place: Fixtures.muenchen, receivedAt: 0))
        #expect(try configured.json("ampel/device/cfg/alert")["lang"] as? String == "de")
        let message = engine.event(.fix(fix("msg", lang: "de-AT"), place: Fixtures.muenchen, receivedAt: 0))
        #expect(try message.json("ampel/device/msg/alert")["lang"] as? String == "de")
        let plain = engine.event(.fix(fix("none"), place: Fixtures.muenchen, receivedAt: 0))
        #expect(try plain.json("ampel/device/none/alert")["lang"] as? String == "en")
    }

    @Test("an older fix than the one held is dropped and changes nothing")
    func outOfOrder() {
        var (engine, _) = started()
        _ = engine.event(.fix(fix(tst: 2000), place: Fixtures.muenchen, receivedAt: 0))
        let before = engine.persisted
        let old = engine.event(.fix(fix(tst: 1999), place: Fixtures.altoetting, receivedAt: 0))
        #expect(old == [.dropped(.outOfOrder)])
        #expect(engine.persisted == before)
        // Without a tst the arrival time stands in.
        let untimed = engine.event(.fix(fix(tst: nil), place: Fixtures.muenchen, receivedAt: 3000))
        #expect(untimed.topics == ["ampel/device/alice/phone/state"])
        #expect(engine.devices["alice/phone"]?.tst == 3000)
    }

    @Test("outside Bavaria is outside with the district named; outside Germany with district null")
    func outside() throws {
        var (engine, _) = started()
        let stuttgart = engine.event(.fix(fix("bw"), place: Fixtures.stuttgart, receivedAt: 0))
        let state = try stuttgart.json("ampel/device/bw/state")
        #expect(state["phase"] as? String == "outside")
        #expect(state["incidence"] is NSNull)
        #expect((state["district"] as? [String: Any])?["name"] as? String == "SK Stuttgart")
        #expect((state["district"] as? [String: Any])?["state"] as? String == "Baden-Württemberg")
        #expect(state["color"] as? String == Fixtures.ruleSet.outside.color.hex)
        let paris = engine.event(.fix(fix("fr", 48.85, 2.35), place: nil, receivedAt: 0))
        let abroad = try paris.json("ampel/device/fr/state")
        #expect(abroad["phase"] as? String == "outside")
        #expect(abroad["district"] is NSNull)
    }

    @Test("a district of the region missing from the data gives no signal, as `ampel check` reports; it is not outside")
    func missingDistrict() throws {
        var districts = Fixtures.october.districts
        districts["09162"] = nil
        let partial = Dataset(date: Fixtures.october.date, source: "partial", districts: districts)
        var (engine, _) = started(partial)
        let actions = engine.event(.fix(fix(), place: Fixtures.muenchen, receivedAt: 0))
        #expect(actions.published.isEmpty)
        let problems = actions.compactMap { if case .problem(let message) = $0 { message } else { nil } }
        #expect(problems.count == 1)
        #expect(problems.first?.contains("09162") == true)
        #expect(engine.devices["alice/phone"] == nil)
        // The same district and data through the domain function `ampel check` uses: the same answer.
        #expect(throws: SignalError.self) {
            try Fixtures.ruleSet.signal(atDistrict: "09162", placeName: "München", dataset: partial, region: .bavaria, language: .en)
        }
        // A district outside the region that the data does not know stays outside, named by the geometry.
        let berlin = engine.event(.fix(fix("b"), place: Fixtures.place("11000", "Berlin"), receivedAt: 0))
        let state = try berlin.json("ampel/device/b/state")
        #expect(state["phase"] as? String == "outside")
        #expect((state["district"] as? [String: Any])?["state"] as? String == "Berlin")
    }

    @Test("every publish is labelled with what it is; alerts exactly on the alert topics")
    func publishKinds() throws {
        let lamp = LampSettings(name: "city", driver: .tasmota, topic: "signs/city", follows: .district("09162"))
        var (engine, start) = started(settings: Fixtures.settings(lamps: [lamp], owntracks: OwnTracksNotices()))
        var phone = fix()
        phone.owntracks = true
        var actions = start + engine.event(.fix(phone, place: Fixtures.muenchen, receivedAt: 0))
        actions += engine.event(.data(Fixtures.november, stale: false))
        var kinds: [SignalEngine.PublishKind: Int] = [:]
        for action in actions.steps {
            guard case .publish(let message, let kind) = action else { continue }
            kinds[kind, default: 0] += 1
            let topic = message.topic
            switch kind {
            case .deviceState: #expect(topic.hasPrefix("ampel/device/") && topic.hasSuffix("/state"))
            case .deviceAlert: #expect(topic.hasPrefix("ampel/device/") && topic.hasSuffix("/alert"))
            case .districtState: #expect(topic.hasPrefix("ampel/district/") && topic.hasSuffix("/state"))
            case .districtPhase: #expect(topic.hasPrefix("ampel/district/") && topic.hasSuffix("/phase"))
            case .districtAlert: #expect(topic.hasPrefix("ampel/district/") && topic.hasSuffix("/alert"))
            case .lamp: #expect(topic.hasPrefix("cmnd/") || topic.hasPrefix("signs/"))
            case .discovery: #expect(topic.hasPrefix("homeassistant/"))
            case .bridgeState: #expect(topic == "ampel/bridge/state")
            case .deviceTransition: #expect(topic == "owntracks/alice/ampel/event")
            case .ownTracksCard: #expect(topic == "owntracks/alice/ampel/info")
            case .texts: #expect(topic.hasPrefix("ampel/rules/bavaria/"))
            case .stateReport: #expect(topic.hasPrefix("ampel/states/"))
            case .homeAssistantEvent: #expect(topic.hasPrefix("ampel/device/") && topic.hasSuffix("/event"))
            }
            #expect(kind.isAlert == topic.hasSuffix("/alert"))
        }
        #expect(Set(kinds.keys) == [.deviceState, .deviceAlert, .districtState, .districtPhase, .districtAlert, .lamp, .discovery,
                                    .deviceTransition, .ownTracksCard, .texts, .homeAssistantEvent])
    }

    @Test("a new dataset publishes only what changed: district states, phases, alerts, device states and alerts")
    func newDataset() throws {
        var (engine, _) = started()
        _ = engine.event(.fix(fix("a"), place: Fixtures.muenchen, receivedAt: 0))
        _ = engine.event(.fix(fix("b"), place: nil, receivedAt: 0))
        let actions = engine.event(.data(Fixtures.november, stale: false))
        // Every district's state changed (new date and incidence).
        #expect(actions.published.filter { $0.topic.hasPrefix("ampel/district/") && $0.topic.hasSuffix("/state") }.count == 96)
        // Phase and alert only where the phase changed, counted independently from the two datasets.
        let changed = Fixtures.november.districts(in: .bavaria).filter { entry in
            let before = try! Fixtures.ruleSet.classify(Fixtures.october[entry.district.ags]!.incidence!)!.id
            return try! Fixtures.ruleSet.classify(entry.incidence!)!.id != before
        }.map { "ampel/district/\($0.district.ags)/phase" }
        let phases = actions.published.filter { $0.topic.hasSuffix("/phase") }
        let districtAlerts = actions.published.filter { $0.topic.hasPrefix("ampel/district/") && $0.topic.hasSuffix("/alert") }
        #expect(phases.map(\.topic).sorted() == changed.sorted())
        #expect(districtAlerts.count == changed.count)
        let alert = try actions.json("ampel/district/09162/alert")
        #expect(alert["from"] as? String == "red")
        #expect(alert["to"] as? String == "darkred")
        #expect(alert["device"] is NSNull)
        // Device a: red -> dark red; device b stays outside but its data date changed.
        #expect(try actions.json("ampel/device/a/alert")["to"] as? String == "darkred")
        #expect(try actions.json("ampel/device/b/state")["dataDate"] as? String == "2020-11-05")
        #expect(actions.on("ampel/device/b/alert").isEmpty)

        // The same dataset again changes nothing.
        let again = engine.event(.data(Fixtures.november, stale: false))
        #expect(again.published.isEmpty)
        // Staleness alone republishes states, without alerts or phases.
        let stale = engine.event(.data(Fixtures.november, stale: true))
        #expect(stale.published.count == 96 + 2)
        #expect(try stale.json("ampel/district/09162/state")["stale"] as? Bool == true)
        #expect(!stale.topics.contains { $0.hasSuffix("/alert") || $0.hasSuffix("/phase") })
    }

    @Test("a restart from the saved state sends no duplicate alert but catches a change made while down")
    func restart() throws {
        var (engine, _) = started()
        _ = engine.event(.fix(fix("a"), place: Fixtures.muenchen, receivedAt: 0))
        let saved = engine.persisted

        // Same data after the restart: no alerts at all.
        var (_, same) = started(restored: saved)
        #expect(!same.topics.contains { $0.hasSuffix("/alert") })
        #expect(!same.steps.contains { if case .publish(let m, _) = $0 { m.topic.hasPrefix("ampel/device/") } else { false } })

        // New data while down: the district and the device hear of it at start.
        let (_, changed) = started(Fixtures.november, restored: saved)
        #expect(try changed.json("ampel/district/09162/alert")["from"] as? String == "red")
        #expect(try changed.json("ampel/device/a/alert")["from"] as? String == "red")
        #expect(changed.on("ampel/device/a/alert").count == 1)

        // A restored device moving on keeps its last tst as the bar.
        var (restored, _) = started(restored: saved)
        #expect(restored.event(.fix(fix("a", tst: 999), place: Fixtures.muenchen, receivedAt: 0)) == [.dropped(.outOfOrder)])
    }

    @Test("a reconnect publishes online first, then every retained topic byte for byte as before and the lamps; devices in batches")
    func reconnected() throws {
        let lamp = LampSettings(name: "city", driver: .tasmota, topic: "signs/city", follows: .district("09162"))
        var settings = Fixtures.settings(lamps: [lamp])
        settings.recoveryBatch = 2
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        // Nothing was published before the start, so a reconnect before it has nothing to repeat.
        #expect(engine.event(.reconnected).isEmpty)
        var before = engine.event(.start)
        for (index, key) in ["a", "b", "c", "d", "e"].enumerated() {
            before += engine.event(.fix(fix(key, tst: 1000 + index, lang: index == 1 ? "de" : nil),
                                        place: index % 2 == 0 ? Fixtures.muenchen : Fixtures.altoetting, receivedAt: 0))
        }
        before += engine.followingReevaluation(engine.event(.data(Fixtures.november, stale: false))).actions
        // What the broker held before it lost everything: the last retained payload per topic.
        var retained: [String: [UInt8]] = [:]
        for message in before.published where message.retain { retained[message.topic] = message.payload }
        let lampCommands = before.published.filter { $0.topic.hasPrefix("cmnd/signs/city/") }.suffix(2)

        var all = engine.event(.reconnected)
        let online = OutgoingMessage(topic: "ampel/bridge/state", text: BridgeState.online, qos: .atLeastOnce, retain: true)
        #expect(all.first == .publish(online, kind: .bridgeState))
        #expect(all.dropFirst().first == .publishInfo)
        var batches = 1
        var last = all
        while case .continueRecovery(let generation)? = last.last {
            last = engine.event(.recoverDevices(generation: generation))
            all += last
            batches += 1
        }
        #expect(batches == 3)  // 5 devices, 2 per batch
        var again: [String: [UInt8]] = [:]
        for message in all.published where message.retain { again[message.topic] = message.payload }
        #expect(again.removeValue(forKey: "ampel/bridge/state") == online.payload)
        #expect(again.keys.sorted() == retained.keys.sorted())
        #expect(again == retained)
        #expect(all.published.filter { $0.retain }.count == retained.count + 1)  // each once
        var kinds = Set<SignalEngine.PublishKind>()
        for case .publish(_, let kind) in all.steps { kinds.insert(kind) }
        #expect(kinds == [.bridgeState, .texts, .districtState, .districtPhase, .discovery, .deviceState, .lamp])
        #expect(all.published.filter { $0.topic.hasPrefix("ampel/district/") && $0.topic.hasSuffix("/state") }.count == 96)
        #expect(all.published.filter { $0.topic.hasPrefix("ampel/device/") }.count == 5)
        #expect(Array(all.published.filter { $0.topic.hasPrefix("cmnd/signs/city/") }) == Array(lampCommands))
        #expect(!all.contains { if case .decide = $0 { true } else { false } })

        // A reconnect during a recovery starts over; the older recovery's next batch is nothing.
        let first = engine.event(.reconnected)
        let second = engine.event(.reconnected)
        guard case .continueRecovery(let old)? = first.last, case .continueRecovery(let new)? = second.last else {
            Issue.record("no recovery batches to continue")
            return
        }
        #expect(old != new)
        #expect(engine.event(.recoverDevices(generation: old)).isEmpty)
        #expect(engine.event(.recoverDevices(generation: new)).on("ampel/device/c/state").count == 1)
    }

    @Test("new data re-evaluates devices in batches: each change announced once, a fix before its batch not repeated, newer data starts over")
    func reevaluationInBatches() throws {
        var settings = Fixtures.settings()
        settings.recoveryBatch = 2
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        _ = engine.event(.start)
        let keys = ["a", "b", "c", "d", "e"]
        for key in keys { _ = engine.event(.fix(fix(key), place: Fixtures.muenchen, receivedAt: 0)) }
        // München red in October, dark red in November: every device changes phase.
        let first = engine.event(.data(Fixtures.november, stale: false))
        #expect(first.published.filter { $0.topic.hasPrefix("ampel/device/") && $0.topic.hasSuffix("/alert") }.count == 2)
        guard case .continueReevaluation(let generation)? = first.last else {
            Issue.record("no re-evaluation batch to continue")
            return
        }
        // Device e reports before its batch: its alert comes with the fix, against the new data.
        let moved = engine.event(.fix(fix("e", tst: 2000), place: Fixtures.muenchen, receivedAt: 0))
        #expect(try moved.json("ampel/device/e/alert")["to"] as? String == "darkred")
        let (rest, batches) = engine.followingReevaluation(engine.event(.reevaluateDevices(generation: generation)))
        #expect(batches == 2)  // c, d; then e, with nothing left to do
        let all = first + moved + rest
        for key in keys {
            #expect(all.on("ampel/device/\(key)/alert").count == 1, "\(key)")
            #expect(try all.json("ampel/device/\(key)/state")["dataDate"] as? String == "2020-11-05")
        }
        // Each alert comes after its decision is persisted and before the state that witnesses it.
        for key in keys {
            let steps = all.steps
            let persist = steps.firstIndex { if case .persist(.device(key, _)) = $0 { true } else { false } }
            let alert = steps.firstIndex { if case .publish(let m, .deviceAlert) = $0 { m.topic == "ampel/device/\(key)/alert" } else { false } }
            let state = steps.lastIndex { if case .publish(let m, .deviceState) = $0 { m.topic == "ampel/device/\(key)/state" } else { false } }
            #expect(persist! < alert! && alert! < state!)
        }

        // Newer data during a walk starts a new one; the older walk's next batch is nothing.
        let stale = engine.event(.data(Fixtures.november, stale: true))
        let newer = engine.event(.data(Fixtures.october, stale: false))
        guard case .continueReevaluation(let old)? = stale.last, case .continueReevaluation(let new)? = newer.last else {
            Issue.record("no re-evaluation batches to continue")
            return
        }
        #expect(old != new)
        #expect(engine.event(.reevaluateDevices(generation: old)).isEmpty)
        let back = engine.followingReevaluation(engine.event(.reevaluateDevices(generation: new))).actions + newer
        #expect(back.published.filter { $0.topic.hasSuffix("/alert") && $0.topic.hasPrefix("ampel/device/") }.count == 5)
    }

    @Test("device discovery configs go out in batches at start and when Home Assistant comes online: each device once")
    func discoveryInBatches() throws {
        var settings = Fixtures.settings()
        settings.recoveryBatch = 2
        var first = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        _ = first.event(.start)
        let keys = ["a", "b", "c", "d", "e"]
        for key in keys { _ = first.event(.fix(fix(key), place: Fixtures.muenchen, receivedAt: 0)) }
        func deviceConfigs(_ actions: [SignalEngine.Action]) -> [String] {
            actions.published.map(\.topic).filter { $0.hasPrefix("homeassistant/sensor/") && $0.contains("/ampel/device_") }
        }
        // A restart: the first event carries the districts' configs and one batch of devices.
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false, restored: first.persisted)
        let start = engine.event(.start)
        #expect(deviceConfigs(start).count == 2)
        #expect(start.published.filter { $0.topic.contains("/ampel/district_") }.count == 96 * 3)
        let (all, batches) = engine.followingReevaluation(start)
        #expect(batches == 3)
        #expect(deviceConfigs(all).count == 5 && Set(deviceConfigs(all)).count == 5)

        let online = engine.event(.homeAssistantOnline)
        #expect(deviceConfigs(online).count == 2)
        let (again, _) = engine.followingReevaluation(online)
        #expect(Set(deviceConfigs(again)) == Set(deviceConfigs(all)) && deviceConfigs(again).count == 5)
        // Nothing changed: the walk announces, it does not republish states or alert.
        #expect(!again.published.contains { $0.topic.hasPrefix("ampel/") })
    }

    @Test("a recovery that reaches a device the re-evaluation has not: the device is brought up to the new data, alert first")
    func recoveryDuringReevaluation() throws {
        var settings = Fixtures.settings(discovery: false)
        settings.recoveryBatch = 1
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        _ = engine.event(.start)
        for key in ["a", "b"] { _ = engine.event(.fix(fix(key), place: Fixtures.muenchen, receivedAt: 0)) }
        let data = engine.event(.data(Fixtures.november, stale: false))
        #expect(data.on("ampel/device/a/alert").count == 1)
        guard case .continueReevaluation(let walk)? = data.last else {
            Issue.record("no re-evaluation batch to continue")
            return
        }
        var recovery = engine.event(.reconnected)
        while case .continueRecovery(let generation)? = recovery.last {
            recovery += engine.event(.recoverDevices(generation: generation))
        }
        let alert = recovery.steps.firstIndex { if case .publish(let m, .deviceAlert) = $0 { m.topic == "ampel/device/b/alert" } else { false } }
        let state = recovery.steps.firstIndex { if case .publish(let m, .deviceState) = $0 { m.topic == "ampel/device/b/state" } else { false } }
        #expect(alert != nil && state != nil && alert! < state!)
        #expect(recovery.on("ampel/device/b/state").count == 1)
        #expect(recovery.on("ampel/device/a/alert").isEmpty)
        // The walk then finds b done.
        #expect(engine.event(.reevaluateDevices(generation: walk)).on("ampel/device/b/alert").isEmpty)
    }

    @Test("the persisted state round-trips through JSON")
    func persistedCodable() throws {
        var (engine, _) = started()
        _ = engine.event(.fix(fix("a", lang: "de"), place: Fixtures.muenchen, receivedAt: 0))
        let data = try JSONEncoder().encode(engine.persisted)
        #expect(try JSONDecoder().decode(PersistedState.self, from: data) == engine.persisted)
    }
}
