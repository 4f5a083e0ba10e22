import AmpelMessages
import AmpelData
import AmpelDomain
import AmpelMQTT
import Logging

/// Everything `ampel run` needs to know, from one YAML file, flags and `AMPEL_*` variables.
///
/// Every key, its default and its flag or variable is documented in `docs/configuration.md`.
/// The values are typed: times are `Duration`s, the protocol version and the log level are the
/// enums of the libraries that use them, so nothing downstream parses or converts again.
/// Loading is pure (text in, value or error out), so a bad file is reported with its key and
/// line before anything connects:
///
/// ```swift
/// let config = try DaemonConfiguration.load(yaml: text, environment: env, flags: .init(broker: "mqtt://10.0.0.2:1883"))
/// config.data.refresh      // .seconds(600)
/// config.mqtt.protocolVersion  // .v5
/// ```
///
/// - The YAML reader is in `DaemonConfiguration+YAML.swift`, the flags and variables in
///   `DaemonConfiguration+Overrides.swift`, the value parsers both share in
///   `DaemonConfiguration+Values.swift`.
public struct DaemonConfiguration: Sendable, Hashable {
    /// The broker, or the nodes of one cluster in the order they are tried.
    public var broker = MQTTBrokerList(.localhost)
    public var mqtt = MQTTSettings()
    /// The first level of every topic the daemon writes (`ampel`).
    public var baseTopic = "ampel"
    /// Where `state` and `info` of this instance go; `nil` means `<base_topic>/bridge`. Each
    /// instance of a partitioned deployment has its own, so that one's Last Will does not mark
    /// the other offline.
    public var bridgeTopic: String?
    /// Where the daemon keeps its state and the last good dataset.
    public var stateDirectory = DaemonConfiguration.defaultStateDirectory(environment: [:])
    /// The language of district topics and of devices that ask for none.
    public var language: Language = .en
    /// `lang` was given (file, flag or variable) rather than left at its default: the status
    /// page then opens in it instead of the browser's language (docs/http.md, "The page").
    public var languageConfigured = false
    public var logLevel: Logger.Level = .info
    /// A bundled rule set name or the path of a rule-set JSON file.
    public var rules = RuleSetCatalog.defaultName
    public var data = DataSettings()
    public var inputs = InputSettings()
    public var alerts = AlertSettings()
    /// Per-device settings, by device key.
    public var devices: [String: DeviceSettings] = [:]
    public var homeAssistant = HomeAssistantSettings()
    public var notify = NotifySettings()
    public var outputs = OutputSettings()
    public var lamps: [LampSettings] = []
    public var http = HTTPSettings()
    /// `devices.forget_after`: a device not heard from for this long is forgotten everywhere
    /// (its retained topics cleared, gone from the state); `nil` (`false`) never forgets.
    public var forgetAfter: Duration? = .seconds(30 * 86_400)

    public init() {}

    /// The topics this instance writes: under ``baseTopic``, its bridge under ``bridgeTopic``.
    public var topics: Topics { Topics(base: baseTopic, bridge: bridgeTopic) }

    /// The daemon's own MQTT session; the broker's address is ``DaemonConfiguration/broker``.
    public struct MQTTSettings: Sendable, Hashable {
        /// Fixed, so the broker keeps the daemon's session (and its QoS 1 locations) while it is away.
        public var clientID = "ampel"
        public var username: String?
        public var password: String?
        /// The CA bundle that verifies an `mqtts://` broker; `nil` means ``systemCAFile``.
        public var caFile: String?
        public var certFile: String?
        public var keyFile: String?
        public var keepAlive: Duration = .seconds(60)
        /// MQTT 5 (the default) brings message expiry for alerts and session expiry.
        public var protocolVersion: MQTTConfiguration.ProtocolVersion = .v5
        /// How long the broker keeps the session while the daemon is away (MQTT 5).
        public var sessionExpiry: Duration = .seconds(7 * 86_400)
        /// The QoS of alerts and OwnTracks transitions (`alert_qos`); `nil` for `auto`, see
        /// ``announcementQoS``.
        public var alertQoS: MQTTQoS?

        /// 2, so that the broker forwards an alert once even when its acknowledgement was lost
        /// with the link and libmosquitto sends it again after the reconnect. `auto` takes 2 on
        /// MQTT 5, where a broker without QoS 2 says so in its CONNACK (Maximum QoS) and
        /// libmosquitto then sends QoS 1; and 1 on MQTT 3.1.1, where it cannot say, and the
        /// brokers that speak only 3.1.1 (nats-server before 2.11, RabbitMQ before 3.13) close
        /// the connection at a QoS 2 publish. Set 2 for mosquitto on 3.1.1.
        public var announcementQoS: MQTTQoS {
            alertQoS ?? (protocolVersion == .v5 ? .exactlyOnce : .atLeastOnce)
        }

        /// The system's CA bundle (Debian, Ubuntu): `mqtts://` works without a `ca_file` for a
        /// broker with a certificate from a public CA, in `ampel run` as in `ampel lamp`.
        public static let systemCAFile = "/etc/ssl/certs/ca-certificates.crt"
    }

    public enum DataSource: String, Sendable, Hashable, CaseIterable {
        /// The RKI's maintained dataset, its daily district CSV (``RKIDatasetClient``).
        case rki
        /// The RKI's ArcGIS layer `RKI_Landkreisdaten` (closed since 2023), for mirrors that still serve it.
        case arcgis
        /// The bundled `RKI_Landkreisdaten` snapshots (all of Germany, 2020-10-15 to 2020-11-23).
        case snapshot
        /// The bundled daily values of the Bavarian districts (2020-11-18 to 2021-11-22).
        case history
        /// Both bundled sets, the newer publication on each day (what `check` and `districts`
        /// answer without `--source`).
        case bundled
    }

    public struct DataSettings: Sendable, Hashable {
        public var source: DataSource = .snapshot
        /// The district file (`rki`, also `file://`) or the ArcGIS query URL (`arcgis`);
        /// `nil` means the source's own default.
        public var url: String?
        /// For a rule set of state indicators with `rki`: the RKI's hospitalisation file (also
        /// `file://`); `nil` means the RKI's file on GitHub.
        public var hospitalisationURL: String?
        /// The same for the DIVI register's state file.
        public var icuURL: String?
        /// When a new publication is held back as a possible wrong release (`rki`).
        public var releaseGuard: ReleaseGuard = .standard
        /// For `snapshot` and `history`: the latest publication on or before this day.
        public var date: Day?
        /// Time between two checks for a new publication.
        public var refresh: Duration = .seconds(600)
        /// Data older than this is flagged `stale`.
        public var maxAge: Duration = .seconds(48 * 3600)
        /// Publications kept in the state directory (and walked for trend and phase in force).
        public var history: Int = 28
    }

    public struct InputSettings: Sendable, Hashable {
        public var owntracks = [try! MQTTTopicFilter("owntracks/+/+")]
        public var plain = [try! MQTTTopicFilter("ampel/location/+")]
        public var traccar: [MQTTTopicFilter] = []
        /// Larger payloads are dropped unread.
        public var maxPayload = 16_384
        /// A fix whose `acc` is above this many metres moves no device into another district
        /// (counted as `inaccurate`); `nil` (`false` in the file) for no limit.
        public var maxAccuracy: Int? = 1_000
    }

    public struct AlertSettings: Sendable, Hashable {
        /// MQTT 5 message expiry of alerts (an alert for a phase long past helps no one).
        public var expiry: Duration = .seconds(3600)
        /// A fix older than this when it arrives (its own time against the daemon's clock)
        /// moves no device into another phase, so it alerts no one: phones deliver the fixes
        /// they queued offline in a burst. `nil` (`false` in the file) for no limit.
        public var maxFixAge: Duration? = .seconds(15 * 60)
        /// How long, or for how many fixes, a device must stay in a new phase before its alert.
        public var minDwell: Dwell = .none
    }

    public struct DeviceSettings: Sendable, Hashable {
        public var lang: Language?
        /// A display name for Home Assistant.
        public var name: String?
        public init(lang: Language? = nil, name: String? = nil) {
            self.lang = lang
            self.name = name
        }
    }

    public struct HomeAssistantSettings: Sendable, Hashable {
        public var discovery = true
        /// `homeassistant.discovery: device`: one config per Home Assistant device with its
        /// entities as components (Home Assistant 2024.11 and later); `entity` (or `true`), the
        /// default, one config per entity, which every release reads.
        public var form: DiscoveryForm = .entity
        public var prefix = "homeassistant"
        /// Announce every device's entities too; `false` keeps it to the bridge and the
        /// districts (a Home Assistant restart then loads 300-odd entities, not one per device).
        public var devices = true
        /// Where Home Assistant announces `online` after its start; discovery is re-sent then.
        public var statusTopic = "homeassistant/status"
    }

    /// Where alerts go besides Ampel's own `…/alert` topics.
    public struct NotifySettings: Sendable, Hashable {
        /// `notify.webhooks`: each alert a webhook wants is POSTed to it (docs/webhooks.md).
        public var webhooks: [WebhookSettings] = []
        /// Each alert of a device that reports as `owntracks/<user>/<device>` is also published to
        /// the OwnTracks apps of that user, as a `transition` (see ``OwnTracksNotices``).
        public var owntracks = true
        /// The device level under which Ampel appears to the user's apps:
        /// `owntracks/<user>/<owntracksDevice>/event` and `…/info`. One topic level.
        public var owntracksDevice = "ampel"
    }

    /// What the retained states carry and how often they go out (docs/topics.md).
    public struct OutputSettings: Sendable, Hashable {
        public enum DeviceStateMode: String, Sendable, Hashable, CaseIterable {
            /// Every accepted fix republishes the device's state (its position and time).
            case everyFix = "every_fix"
            /// A state goes out when something a consumer sees changed, else once a ``heartbeat``.
            case onChange = "on_change"
        }

        /// `outputs.device_state`.
        public var deviceState: DeviceStateMode = .onChange
        /// `outputs.heartbeat`: with `on_change`, the longest a device's retained position and
        /// time lag behind its fixes.
        public var heartbeat: Duration = .seconds(60)
        /// `outputs.texts_in_state`: `title`, `rules` and `always` inside every state, as
        /// before the texts topics; `false` names the texts topic instead (`texts`).
        public var textsInState = false
        /// `outputs.districts`: district states and phases, lamps and Home Assistant discovery.
        /// In a partitioned deployment exactly one instance keeps this on: the others would
        /// publish the same district topics again.
        public var districts = true

        public init() {}

        public init(deviceState: DeviceStateMode, heartbeat: Duration, textsInState: Bool) {
            self.deviceState = deviceState
            self.heartbeat = heartbeat
            self.textsInState = textsInState
        }
    }

    /// The state directory when none is configured: the one every command uses
    /// (``StateDirectory/resolve(environment:)``: `$AMPEL_STATE_DIR`, systemd's
    /// `$STATE_DIRECTORY`, `$XDG_STATE_HOME/ampel`, `~/.local/state/ampel`), so that
    /// `ampel fetch` fills the cache this daemon reads.
    public static func defaultStateDirectory(environment: [String: String]) -> String {
        StateDirectory.path(environment: environment)
    }
}

/// One lamp: which driver, which topic, and what it follows.
public struct LampSettings: Sendable, Hashable {
    public enum Driver: String, Sendable, Hashable, CaseIterable {
        /// `#RRGGBB` to the topic.
        case plain
        /// WLED: `<topic>/col`, `<topic>/api`; availability on `<topic>/status`.
        case wled
        /// Tasmota: `cmnd/<topic>/Color`, `cmnd/<topic>/Power`; availability on `tele/<topic>/LWT`.
        case tasmota
    }

    public enum Follows: Sendable, Hashable {
        case district(String)
        case device(String)
    }

    public var name: String
    public var driver: Driver
    public var topic: String
    public var follows: Follows
    /// `plain` only: a topic on which the lamp reports that it is online.
    public var availabilityTopic: String?
    /// `plain` only: the payload meaning online (default `online`).
    public var onlinePayload: String

    public init(name: String, driver: Driver, topic: String, follows: Follows, availabilityTopic: String? = nil, onlinePayload: String = "online") {
        self.name = name
        self.driver = driver
        self.topic = topic
        self.follows = follows
        self.availabilityTopic = availabilityTopic
        self.onlinePayload = onlinePayload
    }
}

extension MQTTBrokerURL {
    /// The daemon's broker when none is configured.
    public static let localhost = MQTTBrokerURL(host: "localhost", port: 1883, usesTLS: false)
}

/// A configuration that cannot be used: which key, where, and why.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The key as a dotted path (`mqtt.keepalive`, `lamps[0].driver`), or a flag (`--refresh`) or variable.
    public let key: String
    /// The line in the file (1-based), `nil` for flags, variables and a missing file.
    public let line: Int?
    public let message: String

    public init(key: String, line: Int?, message: String) {
        self.key = key
        self.line = line
        self.message = message
    }

    public var description: String {
        if let line { return "config line \(line): \(key): \(message)" }
        return "\(key): \(message)"
    }

    /// A problem with a value before it is tied to a key: the value parsers throw it, the
    /// YAML reader and the overrides add the key (and line).
    public struct Problem: Error, Sendable, Hashable {
        public let message: String
        public init(_ message: String) { self.message = message }
    }
}
