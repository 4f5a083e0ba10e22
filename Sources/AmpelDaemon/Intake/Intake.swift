import AmpelDomain
import AmpelMQTT
import Foundation

/// Which incoming topic means what.
///
/// Pure: built from the configuration, it names the subscriptions and sorts each message
/// to an input parser, a lamp's availability, or Home Assistant's restart.
struct Intake: Sendable {
    enum Route: Sendable, Hashable {
        /// A location for the parser of `kind`, from device `key`. `appTopic`: an OwnTracks app
        /// on `owntracks/<user>/<device>` sent it, whose user's apps can be told of alerts
        /// (``OwnTracksNotices/isAppTopic(_:key:)``).
        case input(InputKind, key: String, appTopic: Bool)
        /// A lamp said whether it is online; `retained` when the broker replayed it at subscribe.
        case lampAvailability(name: String, online: Bool, retained: Bool)
        case homeAssistantOnline
        /// A message of a subscription that means nothing now (Home Assistant going offline).
        case ignore
    }

    let inputs: [(InputKind, MQTTTopicFilter)]
    let lampTopics: [String: [(name: String, online: String)]]
    let homeAssistantStatus: String?

    init(configuration: DaemonConfiguration) {
        var inputs: [(InputKind, MQTTTopicFilter)] = []
        inputs += configuration.inputs.owntracks.map { (.owntracks, $0) }
        inputs += configuration.inputs.plain.map { (.plain, $0) }
        inputs += configuration.inputs.traccar.map { (.traccar, $0) }
        self.inputs = inputs
        var lampTopics: [String: [(name: String, online: String)]] = [:]
        for lamp in configuration.lamps {
            if let availability = LampDriver.availability(of: lamp) {
                lampTopics[availability.topic, default: []].append((lamp.name, availability.online))
            }
        }
        self.lampTopics = lampTopics
        homeAssistantStatus = configuration.homeAssistant.discovery ? configuration.homeAssistant.statusTopic : nil
    }

    /// Every filter the daemon subscribes to.
    var subscriptions: [String] {
        var filters = inputs.map(\.1.filter)
        filters += lampTopics.keys.sorted()
        if let homeAssistantStatus { filters.append(homeAssistantStatus) }
        var seen = Set<String>()
        return filters.filter { seen.insert($0).inserted }
    }

    func route(topic: String, payload: [UInt8], retained: Bool = false) -> [Route] {
        if let lamps = lampTopics[topic] {
            let text = String(decoding: payload, as: UTF8.self)
            return lamps.map { .lampAvailability(name: $0.name, online: $0.online == text, retained: retained) }
        }
        if topic == homeAssistantStatus {
            return [String(decoding: payload, as: UTF8.self) == "online" ? .homeAssistantOnline : .ignore]
        }
        for (kind, filter) in inputs {
            if let key = filter.capture(topic) {
                return [.input(kind, key: key, appTopic: kind == .owntracks && OwnTracksNotices.isAppTopic(topic, key: key))]
            }
        }
        return [.ignore]
    }
}
