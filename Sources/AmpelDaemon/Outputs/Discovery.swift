import AmpelCore
import AmpelDomain

/// Home Assistant MQTT discovery: one enum sensor per district of the region and per device.
///
/// The configs are retained, so Home Assistant finds them after its own restart, and re-sent
/// when it announces `online` on its status topic (it may have lost them). Every entity is
/// available only while `ampel/bridge/state` says `online`.
public struct Discovery: Sendable {
    public let prefix: String
    public let topics: Topics
    public let version: String
    /// The values the sensor can take: the rule set's phases and `outside`.
    public let options: [String]

    public init(prefix: String, topics: Topics, version: String, ruleSet: RuleSet) {
        self.prefix = prefix
        self.topics = topics
        self.version = version
        self.options = ruleSet.phases.map { $0.id.id } + ["outside"]
    }

    /// The topic of a district's config: `<prefix>/sensor/ampel/district_<ags>/config`.
    public func districtTopic(_ ags: String) -> String { "\(prefix)/sensor/\(nodeID)/district_\(ags)/config" }

    /// The topic of a device's config: `<prefix>/sensor/ampel/device_<object id>/config`.
    public func deviceTopic(_ key: String) -> String { "\(prefix)/sensor/\(nodeID)/device_\(DeviceKey.objectID(key))/config" }

    /// The node id: the base topic made safe for Home Assistant.
    var nodeID: String { DeviceKey.objectID(topics.base) }

    public func district(ags: String, name: String) -> OutgoingMessage {
        let id = "\(nodeID)_district_\(ags)"
        let config = SensorConfig(
            name: "Phase",
            uniqueID: id,
            stateTopic: topics.districtState(ags),
            attributesTemplate: #"{{ {"incidence": value_json.incidence, "data_date": value_json.dataDate, "stale": value_json.stale, "color": value_json.color, "title": value_json.title} | tojson }}"#,
            options: options,
            availabilityTopic: topics.bridgeState,
            device: .init(identifiers: [id], name: "Ampel \(name)", model: "District \(ags)", swVersion: version),
            version: version)
        return OutgoingMessage(topic: districtTopic(ags), payload: Encode.json(config), qos: 1, retain: true)
    }

    public func device(key: String, name: String?) -> OutgoingMessage {
        let id = "\(nodeID)_device_\(DeviceKey.objectID(key))"
        let config = SensorConfig(
            name: "Phase",
            uniqueID: id,
            stateTopic: topics.deviceState(key),
            attributesTemplate: #"{{ {"incidence": value_json.incidence, "data_date": value_json.dataDate, "stale": value_json.stale, "color": value_json.color, "title": value_json.title, "district": (value_json.district.name if value_json.district else none), "latitude": value_json.lat, "longitude": value_json.lon} | tojson }}"#,
            options: options,
            availabilityTopic: topics.bridgeState,
            device: .init(identifiers: [id], name: "Ampel \(name ?? key)", model: "Device", swVersion: version),
            version: version)
        return OutgoingMessage(topic: deviceTopic(key), payload: Encode.json(config), qos: 1, retain: true)
    }
}

/// An MQTT sensor's discovery config, in Home Assistant's key names.
struct SensorConfig: Encodable {
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

        init(identifiers: [String], name: String, model: String, swVersion: String) {
            self.identifiers = identifiers
            self.name = name
            self.model = model
            self.sw_version = swVersion
        }
    }

    struct Origin: Encodable {
        var name = "ampel"
        var sw_version: String
    }

    var name: String
    var unique_id: String
    var state_topic: String
    var value_template = "{{ value_json.phase }}"
    var json_attributes_topic: String
    var json_attributes_template: String
    var device_class = "enum"
    var options: [String]
    var icon = "mdi:traffic-light"
    var availability: [Availability]
    var device: Device
    var origin: Origin
    var qos = 1

    init(name: String, uniqueID: String, stateTopic: String, attributesTemplate: String, options: [String], availabilityTopic: String, device: Device, version: String) {
        self.name = name
        unique_id = uniqueID
        state_topic = stateTopic
        json_attributes_topic = stateTopic
        json_attributes_template = attributesTemplate
        self.options = options
        availability = [Availability(topic: availabilityTopic)]
        self.device = device
        origin = Origin(sw_version: version)
    }
}
