import AmpelMQTT
@testable import AmpelDaemon
import AmpelCore
import AmpelData
import AmpelDomain
import AmpelMessages
import Foundation
import Testing

@Suite("Home Assistant discovery")
struct DiscoveryTests {
    let discovery = Discovery(prefix: "homeassistant", topics: Topics(), version: "1.0", ruleSet: Fixtures.ruleSet)

    func configs(_ messages: [OutgoingMessage]) throws -> [String: [String: Any]] {
        var configs: [String: [String: Any]] = [:]
        for message in messages {
            #expect(message.retain && message.qos == .atLeastOnce, "\(message.topic)")
            configs[message.topic] = try #require(JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
        }
        #expect(configs.count == messages.count, "a topic twice")
        return configs
    }

    @Test("a district: an enum phase sensor (its topic and unique id as before), a numeric incidence sensor and an alert event, all via the bridge")
    func district() throws {
        let configs = try self.configs(discovery.district(ags: "09162", name: "SK München"))
        #expect(Set(configs.keys) == ["homeassistant/sensor/ampel/district_09162/config", "homeassistant/sensor/ampel/district_09162_incidence/config",
                                      "homeassistant/event/ampel/district_09162/config"])
        let phase = try #require(configs["homeassistant/sensor/ampel/district_09162/config"])
        #expect(phase["device_class"] as? String == "enum")
        #expect(phase["options"] as? [String] == ["green", "yellow", "red", "darkred", "outside"])
        #expect(phase["state_topic"] as? String == "ampel/district/09162/state")
        #expect(phase["json_attributes_topic"] as? String == "ampel/district/09162/state")
        #expect(phase["value_template"] as? String == "{{ value_json.phase }}")
        #expect(phase["unique_id"] as? String == "ampel_district_09162")
        #expect(phase["default_entity_id"] as? String == "sensor.ampel_district_09162_phase")
        let template = try #require(phase["json_attributes_template"] as? String)
        #expect(template.contains("value_json.incidence") && template.contains("value_json.dataDate") && template.contains("value_json.stale"))

        let incidence = try #require(configs["homeassistant/sensor/ampel/district_09162_incidence/config"])
        #expect(incidence["state_class"] as? String == "measurement")
        #expect(incidence["unit_of_measurement"] as? String == "cases/100k")
        #expect(incidence["value_template"] as? String == "{{ value_json.incidence }}")
        #expect(incidence["state_topic"] as? String == "ampel/district/09162/state")
        #expect(incidence["device_class"] == nil && incidence["options"] == nil)
        #expect(incidence["unique_id"] as? String == "ampel_district_09162_incidence")
        #expect(incidence["default_entity_id"] as? String == "sensor.ampel_district_09162_incidence")

        let alert = try #require(configs["homeassistant/event/ampel/district_09162/config"])
        #expect(alert["event_types"] as? [String] == ["green", "yellow", "red", "darkred", "outside"])
        #expect(alert["state_topic"] as? String == "ampel/district/09162/alert")
        #expect((alert["value_template"] as? String)?.contains(#""event_type": value_json.to"#) == true)
        #expect(alert["unique_id"] as? String == "ampel_district_09162_alert")
        #expect(alert["default_entity_id"] as? String == "event.ampel_district_09162_alert")

        for config in configs.values {
            let availability = try #require((config["availability"] as? [[String: Any]])?.first)
            #expect(availability["topic"] as? String == "ampel/bridge/state")
            #expect(availability["value_template"] as? String == "{{ value_json.state }}")
            let device = try #require(config["device"] as? [String: Any])
            #expect(device["identifiers"] as? [String] == ["ampel_district_09162"])
            #expect(device["name"] as? String == "Ampel SK München")
            #expect(device["via_device"] as? String == "ampel_bridge")
            #expect(config["entity_category"] == nil)
        }
    }

    @Test("a device: phase sensor and alert event on its own topics, distinct unique ids; none with homeassistant.devices false")
    func device() throws {
        let discovery = Discovery(prefix: "ha", topics: Topics(base: "signals"), version: "1.0", ruleSet: Fixtures.ruleSet)
        let object = DeviceKey.objectID("alice/phone")
        #expect(object.hasPrefix("alice_phone_"))
        let configs = try self.configs(discovery.device(key: "alice/phone", name: "Alice"))
        #expect(Set(configs.keys) == ["ha/sensor/signals/device_\(object)/config", "ha/event/signals/device_\(object)/config"])
        let phase = try #require(configs["ha/sensor/signals/device_\(object)/config"])
        #expect(phase["state_topic"] as? String == "signals/device/alice/phone/state")
        #expect(phase["unique_id"] as? String == "signals_device_\(object)")
        #expect(phase["default_entity_id"] as? String == "sensor.signals_device_\(object)_phase")
        let alert = try #require(configs["ha/event/signals/device_\(object)/config"])
        #expect(alert["state_topic"] as? String == "signals/device/alice/phone/event", "its own topic (Decision.HomeAssistantEvent)")
        #expect(alert["unique_id"] as? String == "signals_device_\(object)_alert")
        #expect(alert["default_entity_id"] as? String == "event.signals_device_\(object)_alert")
        for config in configs.values {
            let device = try #require(config["device"] as? [String: Any])
            #expect(device["name"] as? String == "Ampel Alice")
            #expect(device["identifiers"] as? [String] == ["signals_device_\(object)"])
            #expect(device["via_device"] as? String == "signals_bridge")
        }
        let districtsOnly = Discovery(prefix: "ha", topics: Topics(base: "signals"), version: "1.0", ruleSet: Fixtures.ruleSet, devices: false)
        #expect(districtsOnly.device(key: "alice/phone", name: "Alice").isEmpty)
        #expect(districtsOnly.district(ags: "09162", name: "SK München").count == 3)
    }

    @Test("device form: one config per Home Assistant device, its entities as components with their platforms and the same unique ids")
    func deviceForm() throws {
        let byDevice = Discovery(prefix: "homeassistant", topics: Topics(), version: "1.0", ruleSet: Fixtures.ruleSet, form: .device)
        let district = byDevice.district(ags: "09162", name: "SK München")
        #expect(district.map(\.topic) == ["homeassistant/device/ampel/district_09162/config"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(district[0].payload)) as? [String: Any])
        #expect((json["device"] as? [String: Any])?["identifiers"] as? [String] == ["ampel_district_09162"])
        #expect((json["origin"] as? [String: Any])?["name"] as? String == "ampel")
        let components = try #require(json["components"] as? [String: [String: Any]])
        #expect(Set(components.keys) == ["district_09162", "district_09162_incidence", "district_09162_alert"])
        let single = try configs(discovery.district(ags: "09162", name: "SK München"))
        for (id, component) in components {
            #expect(component["device"] == nil && component["origin"] == nil, "the device config's own apply")
            let same = try #require(single.values.first { $0["unique_id"] as? String == component["unique_id"] as? String }, "\(id)")
            #expect(component["platform"] as? String == (id.hasSuffix("_alert") ? "event" : "sensor"))
            #expect(component["state_topic"] as? String == same["state_topic"] as? String)
            #expect(component["default_entity_id"] as? String == same["default_entity_id"] as? String)
        }
        #expect(byDevice.bridge().map(\.topic) == ["homeassistant/device/ampel/bridge/config"])
        #expect(byDevice.device(key: "alice/phone", name: nil).count == 1)
    }

    @Test("the bridge: connectivity from bridge/state (always available), data date and stale from bridge/info, all diagnostic")
    func bridge() throws {
        let configs = try self.configs(discovery.bridge())
        let connectivity = try #require(configs["homeassistant/binary_sensor/ampel/bridge_connectivity/config"])
        #expect(connectivity["state_topic"] as? String == "ampel/bridge/state")
        #expect(connectivity["device_class"] as? String == "connectivity")
        #expect(connectivity["payload_on"] as? String == "online" && connectivity["payload_off"] as? String == "offline")
        #expect(connectivity["availability"] == nil)
        let date = try #require(configs["homeassistant/sensor/ampel/bridge_data_date/config"])
        #expect(date["state_topic"] as? String == "ampel/bridge/info")
        #expect(date["device_class"] as? String == "date")
        #expect(date["value_template"] as? String == "{{ value_json.dataDate }}")
        let stale = try #require(configs["homeassistant/binary_sensor/ampel/bridge_stale/config"])
        #expect(stale["state_topic"] as? String == "ampel/bridge/info")
        #expect(stale["device_class"] as? String == "problem")
        #expect(stale["value_template"] as? String == "{{ 'ON' if value_json.stale else 'OFF' }}")
        #expect(configs.count == 3)
        for config in configs.values {
            #expect(config["entity_category"] as? String == "diagnostic")
            let device = try #require(config["device"] as? [String: Any])
            #expect(device["identifiers"] as? [String] == ["ampel_bridge"])
            #expect(device["via_device"] == nil)
        }
    }

    @Test("discovery is re-sent when Home Assistant comes online, and off when disabled")
    func resend() {
        var engine = SignalEngine(settings: Fixtures.settings(), dataset: Fixtures.october, stale: false)
        _ = engine.event(.start)
        _ = engine.event(.fix(LocationFix(device: "d", latitude: 1, longitude: 1, tst: 1), place: nil, receivedAt: 0))
        // The bridge's 3, 3 per district, 2 for the device.
        #expect(engine.event(.homeAssistantOnline).published.count == 3 + 96 * 3 + 2)
        var off = SignalEngine(settings: Fixtures.settings(discovery: false), dataset: Fixtures.october, stale: false)
        #expect(!off.event(.start).topics.contains { $0.hasPrefix("homeassistant/") })
        #expect(off.event(.homeAssistantOnline).isEmpty)
    }

    @Test("homeassistant.devices false: the bridge and the districts only, at start, on a first sighting and when Home Assistant comes online")
    func districtsOnly() {
        var settings = Fixtures.settings()
        settings.discovery = Discovery(prefix: "homeassistant", topics: Topics(), version: "test", ruleSet: Fixtures.ruleSet, devices: false)
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        let start = engine.event(.start)
        #expect(start.topics.filter { $0.hasPrefix("homeassistant/") }.count == 3 + 96 * 3)
        let fix = engine.event(.fix(LocationFix(device: "d", latitude: 1, longitude: 1, tst: 1), place: nil, receivedAt: 0))
        #expect(!fix.topics.contains { $0.hasPrefix("homeassistant/") })
        #expect(fix.topics.contains("ampel/device/d/alert"))
        let online = engine.followingReevaluation(engine.event(.homeAssistantOnline)).actions
        #expect(online.topics.filter { $0.hasPrefix("homeassistant/") }.count == 3 + 96 * 3)
        #expect(!online.topics.contains { $0.contains("/device_") })
    }
}

@Suite("Home Assistant discovery: removing what an earlier run announced")
struct DiscoveryRemovalTests {
    static let keys = ["a", "b/c", "d", "e", "f"]
    static let full = DiscoveryScope(prefix: "homeassistant", node: "ampel", devices: true)
    static let districtsOnly = DiscoveryScope(prefix: "homeassistant", node: "ampel", devices: false)
    static let byDevice = DiscoveryScope(prefix: "homeassistant", node: "ampel", devices: true, form: .device)

    /// A state with five devices, as the last run left it.
    static let restored: PersistedState = {
        var engine = SignalEngine(settings: Fixtures.settings(), dataset: Fixtures.october, stale: false)
        _ = engine.event(.start)
        for key in keys { _ = engine.event(.fix(LocationFix(device: key, latitude: 48.137, longitude: 11.575, tst: 1), place: Fixtures.muenchen, receivedAt: 0)) }
        return engine.persisted
    }()

    static func settings(devices: Bool?, prefix: String = "homeassistant", announced: [DiscoveryScope], batch: Int = 2,
                         form: DiscoveryForm = .entity) -> SignalEngine.Settings {
        var settings = Fixtures.settings(discovery: devices != nil)
        if let devices {
            settings.discovery = Discovery(prefix: prefix, topics: Topics(), version: "test", ruleSet: Fixtures.ruleSet, devices: devices, form: form)
        }
        settings.announcedDiscovery = announced
        settings.recoveryBatch = batch
        return settings
    }

    /// The start and every batch of its device walk.
    static func start(_ settings: SignalEngine.Settings) -> (engine: SignalEngine, actions: [SignalEngine.Action]) {
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false, restored: restored)
        let actions = engine.followingReevaluation(engine.event(.start)).actions
        return (engine, actions)
    }

    static func records(_ actions: [SignalEngine.Action]) -> [(scopes: [DiscoveryScope], whenTaken: Bool, at: Int)] {
        actions.enumerated().compactMap { index, action in
            if case .recordDiscovery(let scopes, let whenTaken) = action { (scopes, whenTaken, index) } else { nil }
        }
    }

    static func removed(_ actions: [SignalEngine.Action]) -> [String] {
        actions.published.filter { $0.payload.isEmpty }.map(\.topic)
    }

    static func deviceTopics(_ prefix: String, _ key: String) -> [String] {
        let object = DeviceKey.objectID(key)
        return ["\(prefix)/sensor/ampel/device_\(object)/config", "\(prefix)/event/ampel/device_\(object)/config"]
    }

    @Test("devices switched off: an empty retained config for each device entity, recorded first as both scopes, then as the new one once the walk is done")
    func devicesOff() throws {
        let (_, actions) = Self.start(Self.settings(devices: false, announced: [Self.full]))
        let removed = Self.removed(actions)
        #expect(Set(removed) == Set(Self.keys.flatMap { Self.deviceTopics("homeassistant", $0) }))
        #expect(removed.count == Self.keys.count * 2)
        #expect(actions.published.filter { $0.payload.isEmpty }.allSatisfy { $0.retain && $0.qos == .atLeastOnce })
        // The districts stay announced, the devices are not announced again.
        #expect(actions.topics.filter { $0.hasPrefix("homeassistant/") && !removed.contains($0) }.count == 3 + 96 * 3)
        let records = Self.records(actions)
        #expect(records.count == 2)
        #expect(records.first?.scopes == [Self.full, Self.districtsOnly] && records.first?.whenTaken == false && records.first?.at == 0)
        #expect(records.last?.scopes == [Self.districtsOnly] && records.last?.whenTaken == true)
        // The new record comes after the last removal.
        let lastRemoval = try #require(actions.lastIndex { if case .publish(let m, _) = $0 { m.payload.isEmpty } else { false } })
        #expect(try #require(records.last).at > lastRemoval)
    }

    @Test("discovery switched off: the bridge, the districts and the devices each get an empty config; nothing is announced")
    func discoveryOff() {
        let (_, actions) = Self.start(Self.settings(devices: nil, announced: [Self.full]))
        let removed = Self.removed(actions)
        #expect(Set(actions.topics.filter { $0.hasPrefix("homeassistant/") }) == Set(removed))
        #expect(removed.count == 3 + 96 * 3 + Self.keys.count * 2)
        #expect(removed.contains("homeassistant/binary_sensor/ampel/bridge_connectivity/config"))
        #expect(removed.contains("homeassistant/sensor/ampel/district_09162_incidence/config"))
        #expect(removed.contains("homeassistant/event/ampel/district_09162/config"))
        // Nothing new to record before: the file names the old scope until the removals are done.
        let records = Self.records(actions)
        #expect(records.count == 1 && records.first?.scopes == [] && records.first?.whenTaken == true)
    }

    @Test("another prefix: everything under the old one is removed, everything announced under the new one")
    func prefixChanged() {
        let (_, actions) = Self.start(Self.settings(devices: true, prefix: "ha", announced: [Self.full]))
        let removed = Self.removed(actions)
        #expect(removed.allSatisfy { $0.hasPrefix("homeassistant/") })
        #expect(removed.count == 3 + 96 * 3 + Self.keys.count * 2)
        #expect(actions.published.filter { $0.topic.hasPrefix("ha/") && !$0.payload.isEmpty }.count == 3 + 96 * 3 + Self.keys.count * 2)
        let new = DiscoveryScope(prefix: "ha", node: "ampel", devices: true)
        #expect(Self.records(actions).map(\.scopes) == [[Self.full, new], [new]])
    }

    @Test("the same scope as last time: no removal, no record; a first run records its scope before announcing")
    func unchanged() throws {
        let (_, same) = Self.start(Self.settings(devices: true, announced: [Self.full]))
        #expect(Self.removed(same).isEmpty && Self.records(same).isEmpty)
        let (_, first) = Self.start(Self.settings(devices: true, announced: []))
        #expect(Self.removed(first).isEmpty)
        let record = try #require(Self.records(first).first)
        #expect(record.scopes == [Self.full] && !record.whenTaken && record.at == 0)
        // Devices switched on again: announced, nothing removed.
        let (_, on) = Self.start(Self.settings(devices: true, announced: [Self.districtsOnly]))
        #expect(Self.removed(on).isEmpty && Self.records(on).map(\.scopes) == [[Self.full]])
    }

    @Test("a walk that Home Assistant's online replaces half-way still removes every device, and records only at its end")
    func walkReplaced() {
        var engine = SignalEngine(settings: Self.settings(devices: false, announced: [Self.full]), dataset: Fixtures.october, stale: false,
                                  restored: Self.restored)
        var actions = engine.event(.start)
        #expect(Self.removed(actions).count == 2 * 2)
        #expect(Self.records(actions).map(\.whenTaken) == [false])
        actions += engine.followingReevaluation(engine.event(.homeAssistantOnline)).actions
        #expect(Set(Self.removed(actions)) == Set(Self.keys.flatMap { Self.deviceTopics("homeassistant", $0) }))
        #expect(Self.records(actions).map(\.whenTaken) == [false, true])
        // The walk of a later online removes nothing more.
        let later = engine.followingReevaluation(engine.event(.homeAssistantOnline)).actions
        #expect(Self.removed(later).isEmpty && Self.records(later).isEmpty)
    }

    @Test("a run under an incidence set after one under a set of state indicators removes every state sensor, once")
    func stateSensorsRemovedAfterAHospitalSet() throws {
        var hospital = Self.full
        hospital.states = true
        let (_, actions) = Self.start(Self.settings(devices: true, announced: [hospital]))
        let removed = Set(Self.removed(actions))
        let names = ["hospitalisation_cases_7d", "hospitalisation_incidence_7d", "icu_covid_patients"]
        let expected = Set(GermanState.ids.flatMap { id in names.map { "homeassistant/sensor/ampel/state_\(id)_\($0)/config" } })
        #expect(removed == expected)
        #expect(Self.records(actions).last?.scopes == [Self.full])
        // The next start, with the scope recorded, removes nothing.
        let (_, again) = Self.start(Self.settings(devices: true, announced: [Self.full]))
        #expect(Self.removed(again).isEmpty)
    }

    @Test("entity form to device form and back: each old config marked for migration, the new config, then the old one emptied, in that order; the same unique ids")
    func formSwitched() throws {
        for (from, to) in [(DiscoveryForm.entity, DiscoveryForm.device), (.device, .entity)] {
            let old = from == .entity ? Self.full : Self.byDevice
            let (_, actions) = Self.start(Self.settings(devices: true, announced: [old], form: to))
            let published = actions.published.filter { $0.topic.hasPrefix("homeassistant/") }
            let migrate = Array(#"{"migrate_discovery":true}"#.utf8)
            let marked = published.enumerated().filter { $0.element.payload == migrate }
            let emptied = published.enumerated().filter { $0.element.payload.isEmpty }
            let configs = published.enumerated().filter { !$0.element.payload.isEmpty && $0.element.payload != migrate }
            #expect(Set(marked.map(\.element.topic)) == Set(emptied.map(\.element.topic)), "\(from) -> \(to): every marked config is emptied")
            #expect(marked.count == (from == .entity ? 3 + 96 * 3 + Self.keys.count * 2 : 1 + 96 + Self.keys.count))
            #expect(configs.allSatisfy { $0.element.topic.contains("/device/") == (to == .device) })
            // Per old topic: marked, then the new config of the same Home Assistant device, then emptied.
            for (index, mark) in marked {
                let object = mark.topic.split(separator: "/").dropLast().last.map(String.init) ?? ""
                let group = object.hasPrefix("bridge") ? "bridge" : object.replacingOccurrences(of: "_incidence", with: "")
                let new = try #require(configs.first { ($0.element.topic.split(separator: "/").dropLast().last ?? "").hasPrefix(group) },
                                       "\(from) -> \(to): no new config for \(mark.topic)")
                let empty = try #require(emptied.first { $0.element.topic == mark.topic })
                #expect(index < new.offset && new.offset < empty.offset, "\(from) -> \(to): \(mark.topic) at \(index), new \(new.offset), emptied \(empty.offset)")
            }
            // The unique ids of the new form are the old form's.
            func uniqueIDs(_ messages: [OutgoingMessage]) throws -> Set<String> {
                var ids: Set<String> = []
                for message in messages {
                    let json = try #require(try JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
                    if let components = json["components"] as? [String: [String: Any]] {
                        ids.formUnion(components.values.compactMap { $0["unique_id"] as? String })
                    } else if let id = json["unique_id"] as? String {
                        ids.insert(id)
                    }
                }
                return ids
            }
            let (_, before) = Self.start(Self.settings(devices: true, announced: [old], form: from))
            #expect(try uniqueIDs(configs.map(\.element)) == uniqueIDs(before.published.filter { $0.topic.hasPrefix("homeassistant/") && !$0.payload.isEmpty }))
            #expect(Self.records(actions).last?.scopes == [to == .device ? Self.byDevice : Self.full])
        }
    }

    @Test("what a scope leaves behind when the next run announces another")
    func leftBehind() {
        #expect(Self.full.leftBehind(by: Self.full) == (false, false, false, false))
        #expect(Self.full.leftBehind(by: Self.districtsOnly) == (false, true, false, false))
        #expect(Self.districtsOnly.leftBehind(by: Self.full) == (false, false, false, false))
        #expect(Self.full.leftBehind(by: nil) == (true, true, false, false))
        #expect(Self.districtsOnly.leftBehind(by: nil) == (true, false, false, false))
        #expect(Self.full.leftBehind(by: DiscoveryScope(prefix: "homeassistant", node: "signals", devices: true)) == (true, true, false, false))
        let hospital = DiscoveryScope(prefix: "homeassistant", node: "ampel", devices: true, states: true)
        #expect(hospital.leftBehind(by: Self.full) == (false, false, true, false))
        #expect(hospital.leftBehind(by: hospital) == (false, false, false, false))
        // The other form under the same prefix and node: everything, migrated.
        #expect(Self.full.leftBehind(by: Self.byDevice) == (true, true, false, true))
        #expect(Self.byDevice.leftBehind(by: Self.full) == (true, true, false, true))
    }
}

@Suite("Home Assistant discovery: the record of what was announced")
struct DiscoveryScopeFileTests {
    @Test("saved and loaded; without a file nothing on a first run, else the scope of the releases before the file; garbage counts as no file")
    func file() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-scope-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = DiscoveryScopeFile(directory: dir)
        let before = DiscoveryScope(prefix: "ha", node: "signals", devices: true)
        #expect(file.announced(prefix: "ha", topics: Topics(base: "signals"), firstRun: true).scopes == [])
        #expect(file.announced(prefix: "ha", topics: Topics(base: "signals"), firstRun: false).scopes == [before])
        let scopes = [DiscoveryScope(prefix: "homeassistant", node: "ampel", devices: false), before]
        try file.save(scopes)
        #expect(file.load().scopes == scopes)
        #expect(file.announced(prefix: "x", topics: Topics(), firstRun: true).scopes == scopes)
        try Data("{\"announced\":".utf8).write(to: URL(fileURLWithPath: file.path))
        let garbage = file.announced(prefix: "ha", topics: Topics(base: "signals"), firstRun: false)
        #expect(garbage.scopes == [before])
        #expect(garbage.problem?.contains("homeassistant.json") == true)
    }
}
