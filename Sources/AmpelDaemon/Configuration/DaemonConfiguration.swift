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
package struct DaemonConfiguration: Sendable, Hashable {
    /// The broker, or the nodes of one cluster in the order they are tried.
    package var broker = MQTTBrokerList(.localhost)
    package var mqtt = MQTTSettings()
    /// The first level of every topic the daemon writes (`ampel`).
    package var baseTopic = "ampel"
    /// Where `state` and `info` of this instance go; `nil` means `<base_topic>/bridge`. Each
    /// instance of a partitioned deployment has its own, so that one's Last Will does not mark
    /// the other offline.
    package var bridgeTopic: String?
    /// Where the daemon keeps its state and the last good dataset.
    package var stateDirectory = DaemonConfiguration.defaultStateDirectory(environment: [:])
    /// The language of district topics and of devices that ask for none.
    package var language: Language = .en
    /// `lang` was given (file, flag or variable) rather than left at its default: the status
    /// page then opens in it instead of the browser's language (docs/http.md, "The page").
    var languageConfigured = false
    package var logLevel: Logger.Level = .info
    /// A bundled rule set name or the path of a rule-set JSON file.
    package var rules = RuleSetCatalog.defaultName
    package var data = DataSettings()
    var inputs = InputSettings()
    var alerts = AlertSettings()
    /// Per-device settings, by device key.
    var devices: [String: DeviceSettings] = [:]
    package var homeAssistant = HomeAssistantSettings()
    package var notify = NotifySettings()
    var outputs = OutputSettings()
    package var lamps: [LampSettings] = []
    package var http = HTTPSettings()
    /// `devices.forget_after`: a device not heard from for this long is forgotten everywhere
    /// (its retained topics cleared, gone from the state); `nil` (`false`) never forgets.
    var forgetAfter: Duration? = .seconds(30 * 86_400)

    package init() {}

    /// The topics this instance writes: under ``baseTopic``, its bridge under ``bridgeTopic``.
    var topics: Topics { Topics(base: baseTopic, bridge: bridgeTopic) }

    /// The daemon's own MQTT session; the broker's address is ``DaemonConfiguration/broker``.
    package struct MQTTSettings: Sendable, Hashable {
        /// Fixed, so the broker keeps the daemon's session (and its QoS 1 locations) while it is away.
        package var clientID = "ampel"
        var username: String?
        var password: String?
        /// The CA bundle that verifies an `mqtts://` broker; `nil` means ``systemCAFile``.
        var caFile: String?
        var certFile: String?
        var keyFile: String?
        var keepAlive: Duration = .seconds(60)
        /// MQTT 5 (the default) brings message expiry for alerts and session expiry.
        var protocolVersion: MQTTConfiguration.ProtocolVersion = .v5
        /// How long the broker keeps the session while the daemon is away (MQTT 5).
        package var sessionExpiry: Duration = .seconds(7 * 86_400)
        /// The QoS of alerts and OwnTracks transitions (`alert_qos`); `nil` for `auto`, see
        /// ``announcementQoS``.
        var alertQoS: MQTTQoS?

        /// 2, so that the broker forwards an alert once even when its acknowledgement was lost
        /// with the link and libmosquitto sends it again after the reconnect. `auto` takes 2 on
        /// MQTT 5, where a broker without QoS 2 says so in its CONNACK (Maximum QoS) and
        /// libmosquitto then sends QoS 1; and 1 on MQTT 3.1.1, where it cannot say, and the
        /// brokers that speak only 3.1.1 (nats-server before 2.11, RabbitMQ before 3.13) close
        /// the connection at a QoS 2 publish. Set 2 for mosquitto on 3.1.1.
        var announcementQoS: MQTTQoS {
            alertQoS ?? (protocolVersion == .v5 ? .exactlyOnce : .atLeastOnce)
        }

        /// The system's CA bundle (Debian, Ubuntu): `mqtts://` works without a `ca_file` for a
        /// broker with a certificate from a public CA, in `ampel run` as in `ampel lamp`.
        package static let systemCAFile = "/etc/ssl/certs/ca-certificates.crt"
    }

    package enum DataSource: String, Sendable, Hashable, CaseIterable {
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

    package struct DataSettings: Sendable, Hashable {
        package var source: DataSource = .snapshot
        /// The district file (`rki`, also `file://`) or the ArcGIS query URL (`arcgis`);
        /// `nil` means the source's own default.
        var url: String?
        /// For a rule set of state indicators with `rki`: the RKI's hospitalisation file (also
        /// `file://`); `nil` means the RKI's file on GitHub.
        var hospitalisationURL: String?
        /// The same for the DIVI register's state file.
        var icuURL: String?
        /// When a new publication is held back as a possible wrong release (`rki`).
        var releaseGuard: ReleaseGuard = .standard
        /// For `snapshot` and `history`: the latest publication on or before this day.
        var date: Day?
        /// Time between two checks for a new publication.
        package var refresh: Duration = .seconds(600)
        /// Data older than this is flagged `stale`.
        var maxAge: Duration = .seconds(48 * 3600)
        /// Publications kept in the state directory (and walked for trend and phase in force).
        var history: Int = 28
    }

    struct InputSettings: Sendable, Hashable {
        var owntracks = [try! MQTTTopicFilter("owntracks/+/+")]
        var plain = [try! MQTTTopicFilter("ampel/location/+")]
        var traccar: [MQTTTopicFilter] = []
        /// Larger payloads are dropped unread.
        var maxPayload = 16_384
        /// A fix whose `acc` is above this many metres moves no device into another district
        /// (counted as `inaccurate`); `nil` (`false` in the file) for no limit.
        var maxAccuracy: Int? = 1_000
    }

    struct AlertSettings: Sendable, Hashable {
        /// MQTT 5 message expiry of alerts (an alert for a phase long past helps no one).
        var expiry: Duration = .seconds(3600)
        /// A fix older than this when it arrives (its own time against the daemon's clock)
        /// moves no device into another phase, so it alerts no one: phones deliver the fixes
        /// they queued offline in a burst. `nil` (`false` in the file) for no limit.
        var maxFixAge: Duration? = .seconds(15 * 60)
        /// How long, or for how many fixes, a device must stay in a new phase before its alert.
        var minDwell: Dwell = .none
    }

    struct DeviceSettings: Sendable, Hashable {
        var lang: Language?
        /// A display name for Home Assistant.
        var name: String?
        init(lang: Language? = nil, name: String? = nil) {
            self.lang = lang
            self.name = name
        }
    }

    package struct HomeAssistantSettings: Sendable, Hashable {
        package var discovery = true
        /// `homeassistant.discovery: device`: one config per Home Assistant device with its
        /// entities as components (Home Assistant 2024.11 and later); `entity` (or `true`), the
        /// default, one config per entity, which every release reads.
        var form: DiscoveryForm = .entity
        var prefix = "homeassistant"
        /// Announce every device's entities too; `false` keeps it to the bridge and the
        /// districts (a Home Assistant restart then loads 300-odd entities, not one per device).
        var devices = true
        /// Where Home Assistant announces `online` after its start; discovery is re-sent then.
        var statusTopic = "homeassistant/status"
    }

    /// Where alerts go besides Ampel's own `…/alert` topics.
    package struct NotifySettings: Sendable, Hashable {
        /// `notify.webhooks`: each alert a webhook wants is POSTed to it (docs/webhooks.md).
        package var webhooks: [WebhookSettings] = []
        /// Each alert of a device that reports as `owntracks/<user>/<device>` is also published to
        /// the OwnTracks apps of that user, as a `transition` (see ``OwnTracksNotices``).
        package var owntracks = true
        /// The device level under which Ampel appears to the user's apps:
        /// `owntracks/<user>/<owntracksDevice>/event` and `…/info`. One topic level.
        var owntracksDevice = "ampel"
    }

    /// What the retained states carry and how often they go out (docs/topics.md).
    struct OutputSettings: Sendable, Hashable {
        enum DeviceStateMode: String, Sendable, Hashable, CaseIterable {
            /// Every accepted fix republishes the device's state (its position and time).
            case everyFix = "every_fix"
            /// A state goes out when something a consumer sees changed, else once a ``heartbeat``.
            case onChange = "on_change"
        }

        /// `outputs.device_state`.
        var deviceState: DeviceStateMode = .onChange
        /// `outputs.heartbeat`: with `on_change`, the longest a device's retained position and
        /// time lag behind its fixes.
        var heartbeat: Duration = .seconds(60)
        /// `outputs.texts_in_state`: `title`, `rules` and `always` inside every state, as
        /// before the texts topics; `false` names the texts topic instead (`texts`).
        var textsInState = false
        /// `outputs.districts`: district states and phases, lamps and Home Assistant discovery.
        /// In a partitioned deployment exactly one instance keeps this on: the others would
        /// publish the same district topics again.
        var districts = true

        init() {}

        init(deviceState: DeviceStateMode, heartbeat: Duration, textsInState: Bool) {
            self.deviceState = deviceState
            self.heartbeat = heartbeat
            self.textsInState = textsInState
        }
    }

    /// The state directory when none is configured: the one every command uses
    /// (``StateDirectory/resolve(environment:)``: `$AMPEL_STATE_DIR`, systemd's
    /// `$STATE_DIRECTORY`, `$XDG_STATE_HOME/ampel`, `~/.local/state/ampel`), so that
    /// `ampel fetch` fills the cache this daemon reads.
    package static func defaultStateDirectory(environment: [String: String]) -> String {
        StateDirectory.path(environment: environment)
    }
}

/// One lamp: which driver, which topic, and what it follows.
package struct LampSettings: Sendable, Hashable {
    enum Driver: String, Sendable, Hashable, CaseIterable {
        /// `#RRGGBB` to the topic.
        case plain
        /// WLED: `<topic>/col`, `<topic>/api`; availability on `<topic>/status`.
        case wled
        /// Tasmota: `cmnd/<topic>/Color`, `cmnd/<topic>/Power`; availability on `tele/<topic>/LWT`.
        case tasmota
    }

    enum Follows: Sendable, Hashable {
        case district(String)
        case device(String)
    }

    var name: String
    var driver: Driver
    var topic: String
    var follows: Follows
    /// `plain` only: a topic on which the lamp reports that it is online.
    var availabilityTopic: String?
    /// `plain` only: the payload meaning online (default `online`).
    var onlinePayload: String

    init(name: String, driver: Driver, topic: String, follows: Follows, availabilityTopic: String? = nil, onlinePayload: String = "online") {
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
    static let localhost = MQTTBrokerURL(host: "localhost", port: 1883, usesTLS: false)
}

/// A configuration that cannot be used: which key, where, and why.
package struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The key as a dotted path (`mqtt.keepalive`, `lamps[0].driver`), or a flag (`--refresh`) or variable.
    let key: String
    /// The line in the file (1-based), `nil` for flags, variables and a missing file.
    let line: Int?
    let message: String

    package init(key: String, line: Int?, message: String) {
        self.key = key
        self.line = line
        self.message = message
    }

    package var description: String {
        if let line { return "config line \(line): \(key): \(message)" }
        return "\(key): \(message)"
    }

    /// A problem with a value before it is tied to a key: the value parsers throw it, the
    /// YAML reader and the overrides add the key (and line).
    struct Problem: Error, Sendable, Hashable {
        let message: String
        init(_ message: String) { self.message = message }
    }
}
