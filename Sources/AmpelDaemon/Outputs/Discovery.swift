import AmpelCore
import AmpelDomain
import AmpelMessages

/// Home Assistant MQTT discovery: a bridge device with diagnostic entities, and per district
/// of the region and per device a phase sensor and an alert event (plus, per district, a
/// numeric incidence sensor).
///
/// The configs are retained, so Home Assistant finds them after its own restart, and re-sent
/// when it announces `online` on its status topic (it may have lost them). Every entity but
/// the bridge's connectivity is available only while `ampel/bridge/state` says `online`.
/// Entities that go away get an empty retained config (``DiscoveryTopics/removals(_:)``), which makes Home Assistant delete them and the broker drop the config.
struct Discovery: Sendable {
    let topics: Topics
    let version: String
    /// The values the phase sensor and the alert event can take: the rule set's phases and `outside`.
    let options: [String]
    /// Where the configs go, and whether the devices' entities are announced.
    let scope: DiscoveryScope
    let names: DiscoveryTopics

    /// - Parameter devices: announce every device's entities too (`homeassistant.devices`);
    ///   without, only the bridge and the districts.
    /// - Parameter form: one config per entity (every release of Home Assistant) or one per
    ///   Home Assistant device with its entities as components (2024.11 and later).
    init(prefix: String, topics: Topics, version: String, ruleSet: RuleSet, devices: Bool = true, form: DiscoveryForm = .entity) {
        self.topics = topics
        self.version = version
        self.options = ruleSet.phases.map { $0.id.id } + [OutsideMarker.id]
        scope = DiscoveryScope(prefix: prefix, node: DiscoveryTopics.node(of: topics), devices: devices, states: ruleSet.readsStateIndicators,
                               form: form)
        names = DiscoveryTopics(prefix: prefix, node: scope.node, form: form)
    }

    var prefix: String { scope.prefix }

    // MARK: Entities

    /// The bridge: connectivity from `bridge/state`, the data's day and its staleness from
    /// `bridge/info`; the device every other Ampel device names as `via_device`.
    func bridge() -> [OutgoingMessage] {
        let device = EntityConfig.Device(identifiers: [names.bridgeDevice], name: "Ampel", model: "Bridge", swVersion: version, via: nil)
        var connectivity = entity(.bridgeConnectivity, name: "Connectivity", stateTopic: topics.bridgeState,
                                  valueTemplate: "{{ value_json.state }}", device: device)
        connectivity.device_class = "connectivity"
        connectivity.payload_on = "online"
        connectivity.payload_off = "offline"
        connectivity.entity_category = "diagnostic"
        // It shows `offline` itself; unavailable while offline would hide just that.
        connectivity.availability = nil
        var dataDate = entity(.bridgeDataDate, name: "Data date", stateTopic: topics.bridgeInfo,
                              valueTemplate: "{{ value_json.dataDate }}", device: device)
        dataDate.device_class = "date"
        dataDate.entity_category = "diagnostic"
        dataDate.icon = "mdi:calendar"
        var stale = entity(.bridgeStale, name: "Data stale", stateTopic: topics.bridgeInfo,
                           valueTemplate: "{{ 'ON' if value_json.stale else 'OFF' }}", device: device)
        stale.device_class = "problem"
        stale.entity_category = "diagnostic"
        return messages(device, [(.bridgeConnectivity, connectivity), (.bridgeDataDate, dataDate), (.bridgeStale, stale)])
    }

    /// A district's phase sensor, incidence sensor and alert event.
    func district(ags: String, name: String) -> [OutgoingMessage] {
        let device = EntityConfig.Device(identifiers: [names.uniqueID(.districtPhase(ags))], name: "Ampel \(name)",
                                         model: "District \(ags)", swVersion: version, via: names.bridgeDevice)
        let state = topics.districtState(ags)
        let phase = phaseSensor(.districtPhase(ags), stateTopic: state, device: device,
                                attributes: #"{{ {"incidence": value_json.incidence, "data_date": value_json.dataDate, "stale": value_json.stale, "color": value_json.color, "title": value_json.title | default(none), "reason": value_json.reason | default(none), "texts": value_json.texts | default(none)} | tojson }}"#)
        var incidence = entity(.districtIncidence(ags), name: "Incidence", stateTopic: state,
                               valueTemplate: "{{ value_json.incidence }}", device: device)
        incidence.state_class = "measurement"
        incidence.unit_of_measurement = Self.incidenceUnit
        incidence.suggested_display_precision = 1
        incidence.icon = "mdi:virus-outline"
        return messages(device, [(.districtPhase(ags), phase), (.districtIncidence(ags), incidence),
                                 (.districtAlert(ags), alertEvent(.districtAlert(ags), alertTopic: topics.districtAlert(ags), device: device))])
    }

    /// A device's phase sensor and alert event; nothing when the devices are not announced.
    func device(key: String, name: String?) -> [OutgoingMessage] {
        guard scope.devices else { return [] }
        let device = EntityConfig.Device(identifiers: [names.uniqueID(.devicePhase(key))], name: "Ampel \(name ?? key)",
                                         model: "Device", swVersion: version, via: names.bridgeDevice)
        let phase = phaseSensor(.devicePhase(key), stateTopic: topics.deviceState(key), device: device,
                                attributes: #"{{ {"incidence": value_json.incidence, "data_date": value_json.dataDate, "stale": value_json.stale, "color": value_json.color, "title": value_json.title | default(none), "reason": value_json.reason | default(none), "texts": value_json.texts | default(none), "district": (value_json.district.name if value_json.district else none), "latitude": value_json.lat, "longitude": value_json.lon} | tojson }}"#)
        return messages(device, [(.devicePhase(key), phase),
                                 (.deviceAlert(key), alertEvent(.deviceAlert(key), alertTopic: topics.deviceEvent(key), device: device))])
    }

    /// A state's indicators as numeric sensors (`state_class: measurement`) of one device per
    /// state, read from its retained report (``Topics/stateReport(_:)``).
    func state(_ report: StateReport, ruleSet: RuleSet) -> [OutgoingMessage] {
        let device = EntityConfig.Device(identifiers: ["\(names.node)_state_\(report.id)"], name: "Ampel \(report.name)",
                                         model: report.id == "00" ? "Country" : "State \(report.id)", swVersion: version, via: names.bridgeDevice)
        return messages(device, report.indicators.map { value in
            let name = value.key.name.rawValue
            let entity = DiscoveryTopics.Entity.stateIndicator(report.id, name)
            var config = self.entity(entity, name: ruleSet.declaration(of: value.key).title(.en), stateTopic: topics.stateReport(report.id),
                                     valueTemplate: "{{ (value_json.indicators | selectattr('name', 'eq', '\(name)') | first).value }}",
                                     device: device)
            config.state_class = "measurement"
            config.unit_of_measurement = Self.unit(of: value.key.name)
            config.suggested_display_precision = value.key.name == .hospitalisationIncidence7d ? 2 : 0
            config.icon = value.key.name == .icuCovidPatients ? "mdi:bed" : "mdi:hospital-building"
            config.json_attributes_topic = topics.stateReport(report.id)
            config.json_attributes_template = "{{ (value_json.indicators | selectattr('name', 'eq', '\(name)') | first) | tojson }}"
            return (entity, config)
        })
    }

    /// What a state indicator counts.
    static func unit(of name: IndicatorName) -> String {
        switch name {
        case .hospitalisationIncidence7d, .incidence7d: "cases/100k"
        case .icuCovidPatients: "patients"
        default: "cases"
        }
    }

    /// The unit of the incidence sensor: RKI's `cases7_per_100k`.
    static let incidenceUnit = "cases/100k"

    /// The alert payload has no `event_type`: the template makes one from `to` and keeps
    /// what a notification needs as the event's attributes.
    static let alertTemplate = #"{{ {"event_type": value_json.to, "from": value_json["from"], "title": value_json.title, "reason": value_json.reason | default(none), "district": (value_json.district.name if value_json.district else none), "incidence": value_json.incidence, "data_date": value_json.dataDate, "lang": value_json.lang, "rules": value_json.rules} | tojson }}"#

    func phaseSensor(_ entity: DiscoveryTopics.Entity, stateTopic: String, device: EntityConfig.Device, attributes: String) -> EntityConfig {
        var config = self.entity(entity, name: "Phase", stateTopic: stateTopic, valueTemplate: "{{ value_json.phase }}", device: device)
        config.json_attributes_topic = stateTopic
        config.json_attributes_template = attributes
        config.device_class = "enum"
        config.options = options
        config.icon = "mdi:traffic-light"
        return config
    }

    func alertEvent(_ entity: DiscoveryTopics.Entity, alertTopic: String, device: EntityConfig.Device) -> EntityConfig {
        var config = self.entity(entity, name: "Alert", stateTopic: alertTopic, valueTemplate: Self.alertTemplate, device: device)
        config.event_types = options
        config.icon = "mdi:alert-octagon-outline"
        return config
    }

    func entity(_ entity: DiscoveryTopics.Entity, name: String, stateTopic: String, valueTemplate: String, device: EntityConfig.Device) -> EntityConfig {
        EntityConfig(name: name, unique_id: names.uniqueID(entity), default_entity_id: names.defaultEntityID(entity),
                     state_topic: stateTopic, value_template: valueTemplate,
                     availability: [.init(topic: topics.bridgeState)], device: device, origin: .init(sw_version: version))
    }

    /// The configs of one Home Assistant device's entities: one each, or (device form) one
    /// for the device with the entities as its components, keyed by their unique ids' object part.
    func messages(_ device: EntityConfig.Device, _ entities: [(DiscoveryTopics.Entity, EntityConfig)]) -> [OutgoingMessage] {
        guard let first = entities.first else { return [] }
        switch scope.form {
        case .entity:
            return entities.map { OutgoingMessage(topic: names.topic($0.0), payload: Encode.json($0.1), qos: .atLeastOnce, retain: true) }
        case .device:
            var components: [String: EntityConfig] = [:]
            for (entity, config) in entities {
                var component = config
                component.platform = entity.component
                component.device = nil
                component.origin = nil
                components[entity.entityObject.unique] = component
            }
            let config = DeviceConfig(device: device, origin: .init(sw_version: version), components: components)
            return [OutgoingMessage(topic: names.deviceTopic(first.0.group), payload: Encode.json(config), qos: .atLeastOnce, retain: true)]
        }
    }
}

/// How the discovery configs are shaped (`homeassistant.discovery`).
enum DiscoveryForm: String, Codable, Sendable, Hashable {
    /// `<prefix>/<platform>/<node>/<object>/config`, one per entity: every Home Assistant.
    case entity
    /// `<prefix>/device/<node>/<device>/config`, one per Home Assistant device with its
    /// entities as `components`: Home Assistant 2024.11 and later, a third to half the messages.
    case device
}

/// A device-based discovery config: the device, the origin and the entities as components.
struct DeviceConfig: Encodable {
    var device: EntityConfig.Device
    var origin: EntityConfig.Origin
    var components: [String: EntityConfig]
}

/// What one run announced: the discovery prefix, the node (from the base topic) and whether
/// the devices' entities were in it. The daemon keeps the scopes it may have announced in its
/// state directory (``DiscoveryScopeFile``), so that a later run with another scope removes
/// what it no longer announces.
struct DiscoveryScope: Codable, Sendable, Hashable {
    var prefix: String
    var node: String
    var devices: Bool
    /// Whether the states' indicator sensors were in it (under a set of state indicators).
    var states: Bool
    var form: DiscoveryForm

    init(prefix: String, node: String, devices: Bool, states: Bool = false, form: DiscoveryForm = .entity) {
        self.prefix = prefix
        self.node = node
        self.devices = devices
        self.states = states
        self.form = form
    }

    private enum Keys: String, CodingKey { case prefix, node, devices, states, form }

    /// A scope file of a release before the state sensors has no `states`: none were announced.
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        prefix = try c.decode(String.self, forKey: .prefix)
        node = try c.decode(String.self, forKey: .node)
        devices = try c.decode(Bool.self, forKey: .devices)
        states = try c.decodeIfPresent(Bool.self, forKey: .states) ?? false
        // A scope file of a release before the device form: one config per entity.
        form = try c.decodeIfPresent(DiscoveryForm.self, forKey: .form) ?? .entity
    }

    /// What of `self` a run announcing `current` (`nil`: discovery off) leaves behind and
    /// must remove: everything when the prefix or node differ (or discovery is off), else the
    /// devices' entities when `current` no longer announces them.
    ///
    /// Under the same prefix and node in the other form everything is left behind too, and
    /// `migrate` is set: Home Assistant is to keep the entities (their ids and history) and
    /// take them from the new configs, so the old ones are first marked
    /// (``DiscoveryTopics/migrations(_:)``), and emptied only after the new ones.
    func leftBehind(by current: DiscoveryScope?) -> (districts: Bool, devices: Bool, states: Bool, migrate: Bool) {
        guard let current, current.prefix == prefix, current.node == node else { return (true, devices, states, false) }
        if current.form != form { return (true, devices, states, true) }
        return (false, devices && !current.devices, states && !current.states, false)
    }
}

/// The config topics, unique ids and default entity ids of one prefix and node.
struct DiscoveryTopics: Sendable, Hashable {
    enum Entity: Hashable {
        case bridgeConnectivity, bridgeDataDate, bridgeStale
        case districtPhase(String), districtIncidence(String), districtAlert(String)
        case devicePhase(String), deviceAlert(String)
        /// A state's (`00`: Germany's) indicator, by state id and indicator name.
        case stateIndicator(String, String)

        var group: Group {
            switch self {
            case .bridgeConnectivity, .bridgeDataDate, .bridgeStale: .bridge
            case .districtPhase(let ags), .districtIncidence(let ags), .districtAlert(let ags): .district(ags)
            case .devicePhase(let key), .deviceAlert(let key): .device(key)
            case .stateIndicator(let id, _): .state(id)
            }
        }

        /// Home Assistant's platform.
        var component: String {
            switch self {
            case .bridgeConnectivity, .bridgeStale: "binary_sensor"
            case .bridgeDataDate, .districtPhase, .districtIncidence, .devicePhase, .stateIndicator: "sensor"
            case .districtAlert, .deviceAlert: "event"
            }
        }

        /// The object id in the config topic. The phase sensors keep the topics of the first
        /// release (a sensor per district and device), so their entities carry on.
        var topicObject: String {
            switch self {
            case .bridgeConnectivity: "bridge_connectivity"
            case .bridgeDataDate: "bridge_data_date"
            case .bridgeStale: "bridge_stale"
            case .districtPhase(let ags), .districtAlert(let ags): "district_\(ags)"
            case .districtIncidence(let ags): "district_\(ags)_incidence"
            case .devicePhase(let key), .deviceAlert(let key): "device_\(DeviceKey.objectID(key))"
            case .stateIndicator(let id, let name): "state_\(id)_\(name)"
            }
        }

        /// The entity's part of its unique id and entity id; the phase sensors keep the unique
        /// ids of the first release.
        var entityObject: (unique: String, entity: String) {
            switch self {
            case .districtPhase, .devicePhase: (topicObject, topicObject + "_phase")
            case .districtAlert, .deviceAlert: (topicObject + "_alert", topicObject + "_alert")
            default: (topicObject, topicObject)
            }
        }
    }

    /// The Home Assistant device an entity belongs to, and its object id in a device config's topic.
    enum Group: Hashable {
        case bridge, district(String), device(String), state(String)

        var object: String {
            switch self {
            case .bridge: "bridge"
            case .district(let ags): "district_\(ags)"
            case .device(let key): "device_\(DeviceKey.objectID(key))"
            case .state(let id): "state_\(id)"
            }
        }
    }

    let prefix: String
    let node: String
    var form: DiscoveryForm = .entity

    /// The node id: the base topic made safe for Home Assistant.
    static func node(of topics: Topics) -> String { DeviceKey.objectID(topics.base) }

    func topic(_ entity: Entity) -> String { "\(prefix)/\(entity.component)/\(node)/\(entity.topicObject)/config" }
    func deviceTopic(_ group: Group) -> String { "\(prefix)/device/\(node)/\(group.object)/config" }

    /// The config topics of `entities` in this form, each once, in order.
    func configTopics(_ entities: [Entity]) -> [String] {
        guard form == .device else { return entities.map(topic) }
        var seen: Set<String> = []
        return entities.map { deviceTopic($0.group) }.filter { seen.insert($0).inserted }
    }
    func uniqueID(_ entity: Entity) -> String { "\(node)_\(entity.entityObject.unique)" }
    /// Current Home Assistant's `default_entity_id` (`<platform>.<object id>`), which replaced `object_id`.
    func defaultEntityID(_ entity: Entity) -> String { "\(entity.component).\(node)_\(entity.entityObject.entity)" }
    var bridgeDevice: String { "\(node)_bridge" }

    /// Empty retained configs: Home Assistant deletes the entity (one it migrated it keeps),
    /// the broker the config.
    func removals(_ entities: [Entity]) -> [OutgoingMessage] {
        configTopics(entities).map { OutgoingMessage(topic: $0, payload: [], qos: .atLeastOnce, retain: true) }
    }

    /// `{"migrate_discovery": true}` on the configs of `entities`: Home Assistant lets go of
    /// them without deleting their entities, which the configs of the other form then take
    /// over (by their unique ids). Retained, as a config is, until the removal after the new configs.
    func migrations(_ entities: [Entity]) -> [OutgoingMessage] {
        configTopics(entities).map { OutgoingMessage(topic: $0, text: #"{"migrate_discovery":true}"#, qos: .atLeastOnce, retain: true) }
    }

    static func bridgeAndDistricts(_ districts: [String]) -> [Entity] {
        [.bridgeConnectivity, .bridgeDataDate, .bridgeStale] + districts.flatMap {
            [Entity.districtPhase($0), .districtIncidence($0), .districtAlert($0)]
        }
    }

    static func device(_ key: String) -> [Entity] { [.devicePhase(key), .deviceAlert(key)] }

    /// Every state sensor a run under a set of state indicators may have announced: Germany's
    /// and the 16 states', whichever region it had.
    static var states: [Entity] {
        let names = IndicatorDeclaration.known.keys.filter { $0.level == .state }.map(\.name.rawValue).sorted()
        return GermanState.ids.flatMap { id in names.map { Entity.stateIndicator(id, $0) } }
    }
}

/// A discovery config, in Home Assistant's key names; keys left `nil` are not written.
struct EntityConfig: Encodable {
    struct Availability: Encodable {
        var topic: String
        var value_template = "{{ value_json.state }}"
    }

    struct Device: Encodable {
        var identifiers: [String]
        var name: String
        var manufacturer = "Ampel"
        var model: String
        var sw_version: String
        var via_device: String?

        init(identifiers: [String], name: String, model: String, swVersion: String, via: String?) {
            self.identifiers = identifiers
            self.name = name
            self.model = model
            self.sw_version = swVersion
            self.via_device = via
        }
    }

    struct Origin: Encodable {
        var name = "ampel"
        var sw_version: String
    }

    var name: String
    var unique_id: String
    var default_entity_id: String
    var state_topic: String
    var value_template: String
    var json_attributes_topic: String?
    var json_attributes_template: String?
    var device_class: String?
    var options: [String]?
    var event_types: [String]?
    var state_class: String?
    var unit_of_measurement: String?
    var suggested_display_precision: Int?
    var payload_on: String?
    var payload_off: String?
    var entity_category: String?
    var icon: String?
    var availability: [Availability]?
    /// `nil` in a device config's components, which the device config's own apply to.
    var device: Device?
    var origin: Origin?
    /// The platform, in a device config's components only.
    var platform: String?
    var qos = 1
}
