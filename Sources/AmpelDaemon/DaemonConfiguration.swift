import AmpelDomain
import Foundation
import Yams

/// Everything `ampel run` needs to know, from one YAML file, flags and `AMPEL_*` variables.
///
/// Every key, its default and its flag or variable is documented in `docs/configuration.md`.
/// Loading is pure (text in, value or error out), so a bad file is reported with its key and
/// line before anything connects:
///
/// ```swift
/// let config = try DaemonConfiguration.load(yaml: text, environment: env, flags: .init(broker: "mqtt://10.0.0.2:1883"))
/// ```
public struct DaemonConfiguration: Sendable, Hashable {
    public var broker: BrokerURL = .local
    public var mqtt = MQTTSettings()
    /// The first level of every topic the daemon writes (`ampel`).
    public var baseTopic = "ampel"
    /// Where the daemon keeps its state and the last good dataset.
    public var stateDirectory = DaemonConfiguration.defaultStateDirectory(environment: [:])
    /// The language of district topics and of devices that ask for none.
    public var language: Language = .en
    /// swift-log level name: trace, debug, info, notice, warning, error, critical.
    public var logLevel = "info"
    /// A bundled rule set name or the path of a rule-set JSON file.
    public var rules = RuleSetCatalog.defaultName
    public var data = DataSettings()
    public var inputs = InputSettings()
    public var alerts = AlertSettings()
    /// Per-device settings, by device key.
    public var devices: [String: DeviceSettings] = [:]
    public var homeAssistant = HomeAssistantSettings()
    public var lamps: [LampSettings] = []

    public init() {}

    public struct MQTTSettings: Sendable, Hashable {
        /// Fixed, so the broker keeps the daemon's session (and its QoS 1 locations) while it is away.
        public var clientID = "ampel"
        public var username: String?
        public var password: String?
        public var caFile: String?
        public var certFile: String?
        public var keyFile: String?
        public var keepAlive = 60
        /// `5` (default: message expiry, session expiry) or `3.1.1`.
        public var protocolVersion = "5"
        /// How long the broker keeps the session while the daemon is away (MQTT 5), seconds.
        public var sessionExpiry = 7 * 86_400
    }

    public enum DataSource: String, Sendable, Hashable, CaseIterable {
        case rki, snapshot, history
    }

    public struct DataSettings: Sendable, Hashable {
        public var source: DataSource = .snapshot
        /// The RKI query URL (`rki` only); `nil` means the RKI's own service.
        public var url: String?
        /// For `snapshot` and `history`: the latest publication on or before this day.
        public var date: Day?
        /// Seconds between two checks for a new publication.
        public var refresh = 600
        /// Data older than this many seconds is flagged `stale`.
        public var maxAge = 48 * 3600
    }

    public struct InputSettings: Sendable, Hashable {
        public var owntracks = [TopicFilter("owntracks/+/+")!]
        public var plain = [TopicFilter("ampel/location/+")!]
        public var traccar: [TopicFilter] = []
        /// Larger payloads are dropped unread.
        public var maxPayload = 16_384
    }

    public struct AlertSettings: Sendable, Hashable {
        /// MQTT 5 message expiry of alerts, seconds (an alert for a phase long past helps no one).
        public var expiry = 3600
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
        public var prefix = "homeassistant"
        /// Where Home Assistant announces `online` after its start; discovery is re-sent then.
        public var statusTopic = "homeassistant/status"
    }

    /// The state directory when none is configured: systemd's `$STATE_DIRECTORY`, else `./ampel-state`.
    public static func defaultStateDirectory(environment: [String: String]) -> String {
        if let dir = environment["STATE_DIRECTORY"], !dir.isEmpty {
            // systemd may pass several, separated by colons; the first is ours.
            return String(dir.split(separator: ":").first ?? Substring(dir))
        }
        return "ampel-state"
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

/// `mqtt://host:port` or `mqtts://host:port` (TLS), optionally with `user:password@`.
public struct BrokerURL: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var tls: Bool
    public var username: String?
    public var password: String?

    public static let local = BrokerURL(host: "localhost", port: 1883, tls: false)

    public init(host: String, port: Int, tls: Bool, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
        self.username = username
        self.password = password
    }

    /// Parses the URL; the message says what is wrong.
    public init(parsing text: String) throws(ConfigurationError.Problem) {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw .init("'\(text)' is not a broker URL such as mqtt://localhost:1883")
        }
        switch scheme {
        case "mqtt", "tcp": tls = false
        case "mqtts", "ssl", "tls": tls = true
        default: throw .init("scheme '\(scheme)' is not mqtt:// or mqtts://")
        }
        guard let host = components.host, !host.isEmpty else { throw .init("'\(text)' names no host") }
        guard components.path.isEmpty || components.path == "/", components.query == nil else {
            throw .init("'\(text)' has a path or query; a broker URL is mqtt://host:port")
        }
        self.host = host
        if let port = components.port {
            guard (1...65_535).contains(port) else { throw .init("port \(port) is out of range") }
            self.port = port
        } else {
            port = tls ? 8883 : 1883
        }
        username = components.user
        password = components.password
    }

    public var description: String { "\(tls ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
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

    /// A problem before it is tied to a key.
    public struct Problem: Error, Sendable, Hashable {
        public let message: String
        public init(_ message: String) { self.message = message }
    }
}

/// Values given on the command line or in the environment; they win over the file.
public struct ConfigurationOverrides: Sendable, Hashable {
    public var broker: String?
    public var source: String?
    public var url: String?
    public var date: String?
    public var stateDir: String?
    public var refresh: String?
    public var lang: String?
    public var logLevel: String?

    public init(broker: String? = nil, source: String? = nil, url: String? = nil, date: String? = nil,
                stateDir: String? = nil, refresh: String? = nil, lang: String? = nil, logLevel: String? = nil) {
        self.broker = broker
        self.source = source
        self.url = url
        self.date = date
        self.stateDir = stateDir
        self.refresh = refresh
        self.lang = lang
        self.logLevel = logLevel
    }

    /// The flag and variable names, in the order they are applied.
    static var names: [(flag: String, variable: String, path: WritableKeyPath<ConfigurationOverrides, String?>)] {
        [
        ("--broker", "AMPEL_BROKER", \.broker),
        ("--source", "AMPEL_SOURCE", \.source),
        ("--url", "AMPEL_URL", \.url),
        ("--date", "AMPEL_DATE", \.date),
        ("--state-dir", "AMPEL_STATE_DIR", \.stateDir),
        ("--refresh", "AMPEL_REFRESH", \.refresh),
        ("--lang", "AMPEL_LANG", \.lang),
        ("--log-level", "AMPEL_LOG_LEVEL", \.logLevel),
        ]
    }
}

extension DaemonConfiguration {
    /// Reads a configuration: the file's text (or none), then the environment, then the flags.
    ///
    /// - Parameters:
    ///   - yaml: the file's text; `nil` means no file (all defaults).
    ///   - environment: the process environment (passed in, so this stays pure).
    ///   - flags: values from the command line; each wins over its `AMPEL_*` variable.
    /// - Throws: ``ConfigurationError`` naming the key and line, or the flag or variable.
    public static func load(yaml: String?, environment: [String: String] = [:], flags: ConfigurationOverrides = .init()) throws(ConfigurationError) -> DaemonConfiguration {
        var config = DaemonConfiguration()
        config.stateDirectory = defaultStateDirectory(environment: environment)
        if let yaml {
            try config.read(yaml: yaml)
        }
        if let user = environment["AMPEL_MQTT_USERNAME"], !user.isEmpty { config.mqtt.username = user }
        if let password = environment["AMPEL_MQTT_PASSWORD"], !password.isEmpty { config.mqtt.password = password }
        for (flag, variable, path) in ConfigurationOverrides.names {
            if let value = flags[keyPath: path] {
                try config.apply(value, as: flag)
            } else if let value = environment[variable], !value.isEmpty {
                try config.apply(value, as: variable)
            }
        }
        return config
    }

    /// Applies one flag or variable.
    mutating func apply(_ value: String, as name: String) throws(ConfigurationError) {
        func fail(_ message: String) -> ConfigurationError { ConfigurationError(key: name, line: nil, message: message) }
        do throws(ConfigurationError.Problem) {
            switch name {
            case "--broker", "AMPEL_BROKER": broker = try BrokerURL(parsing: value)
            case "--source", "AMPEL_SOURCE": data.source = try Self.dataSource(value)
            case "--url", "AMPEL_URL": data.url = try Self.httpURL(value)
            case "--date", "AMPEL_DATE": data.date = try Self.day(value)
            case "--state-dir", "AMPEL_STATE_DIR":
                guard !value.isEmpty else { throw ConfigurationError.Problem("empty path") }
                stateDirectory = value
            case "--refresh", "AMPEL_REFRESH": data.refresh = try Self.duration(value, minimum: 1)
            case "--lang", "AMPEL_LANG": language = try Self.language(value)
            case "--log-level", "AMPEL_LOG_LEVEL": logLevel = try Self.logLevel(value)
            default: throw ConfigurationError.Problem("unknown override")
            }
        } catch {
            throw fail(error.message)
        }
    }

    // MARK: Value parsers, shared by the file, flags and variables

    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    static func logLevel(_ text: String) throws(ConfigurationError.Problem) -> String {
        let lower = text.lowercased()
        guard logLevels.contains(lower) else { throw .init("'\(text)' is not a log level (\(logLevels.joined(separator: ", ")))") }
        return lower
    }

    static func language(_ text: String) throws(ConfigurationError.Problem) -> Language {
        let primary = text.split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == "." }).first.map { $0.lowercased() } ?? ""
        guard let language = Language(rawValue: primary) else { throw .init("'\(text)' is not a language Ampel speaks (de, en)") }
        return language
    }

    static func dataSource(_ text: String) throws(ConfigurationError.Problem) -> DataSource {
        guard let source = DataSource(rawValue: text.lowercased()) else {
            throw .init("'\(text)' is not a data source (rki, snapshot, history)")
        }
        return source
    }

    static func day(_ text: String) throws(ConfigurationError.Problem) -> Day {
        guard let day = Day(iso: text) else { throw .init("'\(text)' is not a day as YYYY-MM-DD") }
        return day
    }

    static func httpURL(_ text: String) throws(ConfigurationError.Problem) -> String {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              url.host?.isEmpty == false else {
            throw .init("'\(text)' is not an http:// or https:// URL")
        }
        return text
    }

    /// Seconds, or a number with `s`, `m`, `h` or `d`: `600`, `10m`, `48h`.
    static func duration(_ text: String, minimum: Int = 0) throws(ConfigurationError.Problem) -> Int {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        var digits = Substring(trimmed)
        var factor = 1
        if let unit = trimmed.last, !unit.isNumber {
            switch unit {
            case "s": factor = 1
            case "m": factor = 60
            case "h": factor = 3600
            case "d": factor = 86_400
            default: throw .init("'\(text)' is not a duration (seconds, or a number with s, m, h or d: 10m)")
            }
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
              let value = Int(digits), value <= 100 * 366 * 86_400 / factor else {
            throw .init("'\(text)' is not a duration (seconds, or a number with s, m, h or d: 10m)")
        }
        guard value * factor >= minimum else { throw .init("'\(text)' is shorter than \(minimum) s") }
        return value * factor
    }
}

// MARK: - Reading the YAML file

extension DaemonConfiguration {
    mutating func read(yaml: String) throws(ConfigurationError) {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw Self.syntaxError(error)
        } catch {
            throw ConfigurationError(key: "(file)", line: nil, message: "not valid YAML: \(error)")
        }
        guard let root else { return }  // An empty file: all defaults.
        if case .scalar = root, root.null != nil { return }
        let top = try MappingReader(root, path: "")
        try top.allow(["broker", "mqtt", "base_topic", "state_dir", "lang", "log_level", "rules", "data", "inputs",
                       "alerts", "devices", "homeassistant", "lamps"])
        if let v = top["broker"] { broker = try v.convert { (s) throws(ConfigurationError.Problem) in try BrokerURL(parsing: s) } }
        if let v = top["base_topic"] {
            baseTopic = try v.convert { (s) throws(ConfigurationError.Problem) in
                guard DeviceKey.isSafe(s) else { throw .init("'\(s)' is not a topic without wildcards") }
                return s
            }
        }
        if let v = top["state_dir"] { stateDirectory = try v.nonEmptyString() }
        if let v = top["lang"] { language = try v.convert(Self.language) }
        if let v = top["log_level"] { logLevel = try v.convert(Self.logLevel) }
        if let v = top["rules"] { rules = try v.nonEmptyString() }
        if let m = try top.mapping("mqtt") { try readMQTT(m) }
        if let m = try top.mapping("data") { try readData(m) }
        if let m = try top.mapping("inputs") { try readInputs(m) }
        if let m = try top.mapping("alerts") {
            try m.allow(["expiry"])
            if let v = m["expiry"] { alerts.expiry = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 1) } }
        }
        if let m = try top.mapping("devices") { try readDevices(m) }
        if let m = try top.mapping("homeassistant") {
            try m.allow(["discovery", "prefix", "status_topic"])
            if let v = m["discovery"] { homeAssistant.discovery = try v.bool() }
            if let v = m["prefix"] { homeAssistant.prefix = try v.topic() }
            if let v = m["status_topic"] { homeAssistant.statusTopic = try v.topic() }
        }
        if let v = top["lamps"] { try readLamps(v) }
    }

    mutating func readMQTT(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["client_id", "username", "password", "ca_file", "cert_file", "key_file", "keepalive", "protocol", "session_expiry"])
        if let v = m["client_id"] { mqtt.clientID = try v.nonEmptyString() }
        if let v = m["username"] { mqtt.username = try v.optionalString() }
        if let v = m["password"] { mqtt.password = try v.optionalString() }
        if let v = m["ca_file"] { mqtt.caFile = try v.optionalString() }
        if let v = m["cert_file"] { mqtt.certFile = try v.optionalString() }
        if let v = m["key_file"] { mqtt.keyFile = try v.optionalString() }
        if let v = m["keepalive"] { mqtt.keepAlive = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 5) } }
        if let v = m["session_expiry"] { mqtt.sessionExpiry = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s) } }
        if let v = m["protocol"] {
            mqtt.protocolVersion = try v.convert { (s) throws(ConfigurationError.Problem) in
                switch s {
                case "5", "5.0": return "5"
                case "3.1.1", "311": return "3.1.1"
                default: throw .init("'\(s)' is not an MQTT protocol version (5 or 3.1.1)")
                }
            }
        }
        if (mqtt.certFile == nil) != (mqtt.keyFile == nil) {
            let key = mqtt.certFile == nil ? "key_file" : "cert_file"
            throw ConfigurationError(key: "mqtt.\(key)", line: m[key]?.line, message: "cert_file and key_file go together")
        }
    }

    mutating func readData(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["source", "url", "date", "refresh", "max_age"])
        if let v = m["source"] { data.source = try v.convert(Self.dataSource) }
        if let v = m["url"] { data.url = try v.convert(Self.httpURL) }
        if let v = m["date"] { data.date = try v.convert(Self.day) }
        if let v = m["refresh"] { data.refresh = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 1) } }
        if let v = m["max_age"] { data.maxAge = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 1) } }
    }

    mutating func readInputs(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["owntracks", "plain", "traccar", "max_payload"])
        if let v = m["owntracks"] { inputs.owntracks = try v.filters() }
        if let v = m["plain"] { inputs.plain = try v.filters() }
        if let v = m["traccar"] { inputs.traccar = try v.filters() }
        if let v = m["max_payload"] {
            inputs.maxPayload = try v.convert { (s) throws(ConfigurationError.Problem) in
                guard let n = Int(s), (64...10_000_000).contains(n) else { throw .init("'\(s)' is not a byte count from 64 to 10000000") }
                return n
            }
        }
    }

    mutating func readDevices(_ m: MappingReader) throws(ConfigurationError) {
        for entry in m.entries {
            guard DeviceKey.isSafe(entry.key) else {
                throw ConfigurationError(key: m.child(entry.key), line: entry.keyNode.line, message: "'\(entry.key)' is not a device key (safe topic levels, e.g. alice/phone)")
            }
            var settings = DeviceSettings()
            if entry.value.isNull {
                devices[entry.key] = settings
                continue
            }
            let d = try MappingReader(entry.value.node, path: m.child(entry.key))
            try d.allow(["lang", "name"])
            if let v = d["lang"] { settings.lang = try v.convert(Self.language) }
            if let v = d["name"] { settings.name = try v.nonEmptyString() }
            devices[entry.key] = settings
        }
    }

    mutating func readLamps(_ value: ValueReader) throws(ConfigurationError) {
        if value.isNull { lamps = []; return }
        guard case .sequence(let sequence) = value.node else {
            throw value.error("expected a list of lamps")
        }
        var names = Set<String>()
        for (index, item) in sequence.enumerated() {
            let path = "\(value.path)[\(index)]"
            let l = try MappingReader(item, path: path)
            try l.allow(["name", "driver", "topic", "district", "device", "availability_topic", "online_payload"])
            guard let driverValue = l["driver"] else { throw ConfigurationError(key: "\(path).driver", line: item.mark?.line, message: "missing (plain, wled or tasmota)") }
            let driver = try driverValue.convert { (s) throws(ConfigurationError.Problem) in
                guard let d = LampSettings.Driver(rawValue: s) else { throw .init("'\(s)' is not a lamp driver (plain, wled, tasmota)") }
                return d
            }
            guard let topicValue = l["topic"] else { throw ConfigurationError(key: "\(path).topic", line: item.mark?.line, message: "missing") }
            let topic = try topicValue.topic()
            let follows: LampSettings.Follows
            switch (l["district"], l["device"]) {
            case (let d?, nil):
                follows = .district(try d.convert { (s) throws(ConfigurationError.Problem) in
                    guard District.isValidCode(s) else { throw .init("'\(s)' is not a five-digit district code (quote it: \"09162\")") }
                    return s
                })
            case (nil, let d?):
                follows = .device(try d.convert { (s) throws(ConfigurationError.Problem) in
                    guard DeviceKey.isSafe(s) else { throw .init("'\(s)' is not a device key") }
                    return s
                })
            case (nil, nil):
                throw ConfigurationError(key: path, line: item.mark?.line, message: "a lamp follows a district or a device: give `district` or `device`")
            case (_, let d?):
                throw ConfigurationError(key: "\(path).device", line: d.line, message: "give either `district` or `device`, not both")
            }
            let name = try l["name"]?.nonEmptyString() ?? topic
            guard names.insert(name).inserted else {
                throw ConfigurationError(key: "\(path).name", line: (l["name"] ?? topicValue).line, message: "a second lamp named '\(name)'")
            }
            var lamp = LampSettings(name: name, driver: driver, topic: topic, follows: follows)
            for key in ["availability_topic", "online_payload"] where l[key] != nil && driver != .plain {
                throw ConfigurationError(key: "\(path).\(key)", line: l[key]?.line, message: "only for driver plain (\(driver.rawValue) lamps report on their own topic)")
            }
            if let v = l["availability_topic"] { lamp.availabilityTopic = try v.topic() }
            if let v = l["online_payload"] { lamp.onlinePayload = try v.nonEmptyString() }
            lamps.append(lamp)
        }
    }

    static func syntaxError(_ error: YamlError) -> ConfigurationError {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _), .composer(let context, let problem, let mark, _):
            let detail = context.map { "\(problem) (\($0.text))" } ?? problem
            return ConfigurationError(key: "(syntax)", line: mark.line, message: "not valid YAML: \(detail)")
        default:
            return ConfigurationError(key: "(syntax)", line: nil, message: "not valid YAML: \(error)")
        }
    }
}

/// One value of the file with its dotted path and line, and typed readers that fail with both.
struct ValueReader {
    let node: Node
    let path: String

    var line: Int? { node.mark?.line }
    var isNull: Bool {
        if case .scalar(let scalar) = node { return scalar.style == .plain && node.null != nil }
        return false
    }

    func error(_ message: String) -> ConfigurationError {
        ConfigurationError(key: path, line: line, message: message)
    }

    /// The scalar's text as written (so `09162` stays `09162`).
    func scalarText() throws(ConfigurationError) -> String {
        guard case .scalar(let scalar) = node else { throw error("expected a single value, not a list or mapping") }
        return scalar.string
    }

    func nonEmptyString() throws(ConfigurationError) -> String {
        let text = try scalarText()
        guard !isNull, !text.isEmpty else { throw error("must not be empty") }
        return text
    }

    func optionalString() throws(ConfigurationError) -> String? {
        if isNull { return nil }
        let text = try scalarText()
        return text.isEmpty ? nil : text
    }

    func bool() throws(ConfigurationError) -> Bool {
        let text = try scalarText().lowercased()
        switch text {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw error("expected true or false, got '\(text)'")
        }
    }

    func topic() throws(ConfigurationError) -> String {
        try convert { (s) throws(ConfigurationError.Problem) in
            guard DeviceKey.isSafe(s) else { throw .init("'\(s)' is not a topic without wildcards") }
            return s
        }
    }

    func convert<T>(_ parse: (String) throws(ConfigurationError.Problem) -> T) throws(ConfigurationError) -> T {
        let text = try nonEmptyString()
        do throws(ConfigurationError.Problem) {
            return try parse(text)
        } catch {
            throw self.error(error.message)
        }
    }

    /// One topic filter, a list of them, or `false`/null/`[]` for none.
    func filters() throws(ConfigurationError) -> [TopicFilter] {
        if isNull { return [] }
        switch node {
        case .scalar:
            if let flag = try? bool(), flag == false { return [] }
            return [try filter(self)]
        case .sequence(let sequence):
            var result: [TopicFilter] = []
            for (index, item) in sequence.enumerated() {
                result.append(try filter(ValueReader(node: item, path: "\(path)[\(index)]")))
            }
            return result
        default:
            throw error("expected a topic filter or a list of them")
        }
    }

    private func filter(_ value: ValueReader) throws(ConfigurationError) -> TopicFilter {
        try value.convert { (s) throws(ConfigurationError.Problem) in
            guard let filter = TopicFilter(s) else { throw .init("'\(s)' is not a valid MQTT topic filter") }
            return filter
        }
    }
}

/// A mapping of the file: its keys in order, with unknown and repeated keys reported.
struct MappingReader {
    struct Entry {
        let key: String
        let keyNode: ValueReader
        let value: ValueReader
    }

    let path: String
    let line: Int?
    let entries: [Entry]

    init(_ node: Node, path: String) throws(ConfigurationError) {
        guard case .mapping(let mapping) = node else {
            throw ConfigurationError(key: path.isEmpty ? "(top level)" : path, line: node.mark?.line, message: "expected a mapping of keys to values")
        }
        self.path = path
        self.line = node.mark?.line
        var entries: [Entry] = []
        var seen = Set<String>()
        for (keyNode, value) in mapping {
            guard case .scalar(let scalar) = keyNode else {
                throw ConfigurationError(key: path.isEmpty ? "(top level)" : path, line: keyNode.mark?.line, message: "a key must be a plain word")
            }
            let key = scalar.string
            let child = path.isEmpty ? key : "\(path).\(key)"
            guard seen.insert(key).inserted else {
                throw ConfigurationError(key: child, line: keyNode.mark?.line, message: "given twice")
            }
            entries.append(Entry(key: key, keyNode: ValueReader(node: keyNode, path: child), value: ValueReader(node: value, path: child)))
        }
        self.entries = entries
    }

    func child(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    subscript(key: String) -> ValueReader? { entries.first { $0.key == key }?.value }

    /// Fails on the first key not in `known`, naming the known ones.
    func allow(_ known: [String]) throws(ConfigurationError) {
        for entry in entries where !known.contains(entry.key) {
            throw ConfigurationError(key: child(entry.key), line: entry.keyNode.line,
                                     message: "unknown key (known here: \(known.joined(separator: ", ")))")
        }
    }

    /// The nested mapping at `key`; `nil` when absent or null.
    func mapping(_ key: String) throws(ConfigurationError) -> MappingReader? {
        guard let value = self[key], !value.isNull else { return nil }
        return try MappingReader(value.node, path: value.path)
    }
}
