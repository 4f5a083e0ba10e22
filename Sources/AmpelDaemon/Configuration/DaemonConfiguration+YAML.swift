import AmpelMessages
import AmpelData
import AmpelMQTT
import AmpelDomain
import Yams

// The YAML file: every mapping is read by a ``MappingReader`` that rejects unknown and repeated
// keys, every value by a ``ValueReader`` that knows its dotted path and line, so each error
// names both. The value parsers themselves are in `DaemonConfiguration+Values.swift`.

extension DaemonConfiguration {
    /// Reads the file's keys over the current values (the defaults, when called by `load`).
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
        try top.allow(["broker", "mqtt", "base_topic", "bridge_topic", "outputs", "state_dir", "lang", "log_level", "rules", "data",
                       "inputs", "alerts", "devices", "homeassistant", "lamps", "notify", "http"])
        if let v = top["broker"] { try readBroker(v) }
        if let v = top["bridge_topic"] {
            bridgeTopic = try v.convert { (s) throws(ConfigurationError.Problem) in
                guard DeviceKey.isSafe(s) else { throw .init("'\(s)' is not a topic without wildcards") }
                return s
            }
        }
        if let v = top["base_topic"] {
            baseTopic = try v.convert { (s) throws(ConfigurationError.Problem) in
                guard DeviceKey.isSafe(s) else { throw .init("'\(s)' is not a topic without wildcards") }
                return s
            }
        }
        if let v = top["state_dir"] { stateDirectory = try v.nonEmptyString() }
        if let v = top["lang"] { language = try v.convert(Self.language); languageConfigured = true }
        if let v = top["log_level"] { logLevel = try v.convert(Self.logLevel) }
        if let v = top["rules"] { rules = try v.nonEmptyString() }
        if let m = try top.mapping("mqtt") { try readMQTT(m) }
        if let m = try top.mapping("data") { try readData(m) }
        if let m = try top.mapping("inputs") { try readInputs(m) }
        if let m = try top.mapping("alerts") { try readAlerts(m) }
        if let m = try top.mapping("devices") { try readDevices(m) }
        if let m = try top.mapping("homeassistant") { try readHomeAssistant(m) }
        if let m = try top.mapping("notify") { try readNotify(m) }
        if let m = try top.mapping("outputs") { try readOutputs(m) }
        if let v = top["lamps"] { try readLamps(v) }
        if let m = try top.mapping("http") { try readHTTP(m) }
        if !outputs.districts, let index = lamps.firstIndex(where: { if case .district = $0.follows { true } else { false } }) {
            throw ConfigurationError(
                key: "lamps[\(index)].district", line: top["lamps"]?.line,
                message: "this instance does not publish districts (outputs.districts: false); a lamp that follows a district belongs to the instance that does")
        }
    }

    mutating func readAlerts(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["expiry", "max_fix_age", "min_dwell"])
        if let v = m["expiry"] { alerts.expiry = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 1) } }
        if let v = m["max_fix_age"] {
            alerts.maxFixAge = try v.unlessOff { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 1) }
        }
        if let v = m["min_dwell"] { alerts.minDwell = try v.convert(Self.dwell) }
    }

    mutating func readHomeAssistant(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["discovery", "devices", "prefix", "status_topic"])
        if let v = m["discovery"] {
            (homeAssistant.discovery, homeAssistant.form) = try v.convert { (s) throws(ConfigurationError.Problem) in
                if let on = ValueReader.boolean(s) { return (on, .entity) }
                switch s.lowercased() {
                case "entity": return (true, .entity)
                case "device": return (true, .device)
                default: throw .init("'\(s)' is not entity, device, true or false (device: one config per device, Home Assistant 2024.11 and later)")
                }
            }
        }
        if let v = m["devices"] { homeAssistant.devices = try v.bool() }
        if let v = m["prefix"] { homeAssistant.prefix = try v.topic() }
        if let v = m["status_topic"] { homeAssistant.statusTopic = try v.topic() }
    }

    mutating func readOutputs(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["device_state", "heartbeat", "texts_in_state", "districts"])
        if let v = m["districts"] { outputs.districts = try v.bool() }
        if let v = m["device_state"] {
            outputs.deviceState = try v.convert { (s) throws(ConfigurationError.Problem) in
                guard let mode = OutputSettings.DeviceStateMode(rawValue: s) else {
                    throw .init("'\(s)' is not a device state mode (every_fix, on_change)")
                }
                return mode
            }
        }
        if let v = m["heartbeat"] { outputs.heartbeat = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 1) } }
        if let v = m["texts_in_state"] { outputs.textsInState = try v.bool() }
    }

    /// `notify`: every way an alert reaches a person besides Ampel's own topics, read here alone.
    mutating func readNotify(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["owntracks", "owntracks_device", "webhooks"])
        if let v = m["webhooks"] { try readWebhooks(v) }
        if let v = m["owntracks"] { notify.owntracks = try v.bool() }
        if let v = m["owntracks_device"] {
            notify.owntracksDevice = try v.convert { (s) throws(ConfigurationError.Problem) in
                // It replaces the device level of `owntracks/<user>/<device>/event`: one level only.
                guard DeviceKey.isSafe(s), !s.contains("/") else { throw .init("'\(s)' is not one topic level without wildcards") }
                return s
            }
        }
    }

    /// `broker`: one URL, or a list of the nodes of one cluster (each entry checked, then the
    /// list as a whole: one scheme, one login, no node twice).
    mutating func readBroker(_ value: ValueReader) throws(ConfigurationError) {
        guard case .sequence(let sequence) = value.node else {
            broker = try value.convert(Self.broker)
            return
        }
        var urls: [MQTTBrokerURL] = []
        for (index, item) in sequence.enumerated() {
            let entry = ValueReader(node: item, path: "\(value.path)[\(index)]")
            urls.append(contentsOf: try entry.convert(Self.broker).urls)
        }
        do {
            broker = try MQTTBrokerList(urls)
        } catch {
            throw value.error(error.message)
        }
    }

    mutating func readMQTT(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["client_id", "username", "password", "ca_file", "cert_file", "key_file", "keepalive", "protocol", "session_expiry", "alert_qos"])
        if let v = m["client_id"] { mqtt.clientID = try v.nonEmptyString() }
        if let v = m["username"] { mqtt.username = try v.optionalString() }
        if let v = m["password"] { mqtt.password = try v.optionalString() }
        if let v = m["ca_file"] { mqtt.caFile = try v.optionalString() }
        if let v = m["cert_file"] { mqtt.certFile = try v.optionalString() }
        if let v = m["key_file"] { mqtt.keyFile = try v.optionalString() }
        if let v = m["keepalive"] { mqtt.keepAlive = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 5) } }
        if let v = m["session_expiry"] { mqtt.sessionExpiry = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s) } }
        if let v = m["protocol"] { mqtt.protocolVersion = try v.convert(Self.protocolVersion) }
        if let v = m["alert_qos"] {
            mqtt.alertQoS = try v.convert { (s) throws(ConfigurationError.Problem) in
                switch s {
                case "auto": return nil
                case "1": return .atLeastOnce
                case "2": return .exactlyOnce
                default: throw .init("'\(s)' is not auto, 1 or 2 (1 for a broker without QoS 2, such as nats-server before 2.11 or RabbitMQ)")
                }
            }
        }
        if (mqtt.certFile == nil) != (mqtt.keyFile == nil) {
            let key = mqtt.certFile == nil ? "key_file" : "cert_file"
            throw ConfigurationError(key: "mqtt.\(key)", line: m[key]?.line, message: "cert_file and key_file go together")
        }
    }

    mutating func readData(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["source", "url", "hospitalisation_url", "icu_url", "date", "refresh", "max_age", "history", "guard_factor", "guard_share"])
        if let v = m["source"] { data.source = try v.convert(Self.dataSource) }
        if let v = m["url"] { data.url = try v.convert(Self.dataURL) }
        if let v = m["hospitalisation_url"] { data.hospitalisationURL = try v.convert(Self.dataURL) }
        if let v = m["icu_url"] { data.icuURL = try v.convert(Self.dataURL) }
        if let v = m["guard_factor"] { data.releaseGuard.factor = try v.convert(Self.guardFactor) }
        if let v = m["guard_share"] { data.releaseGuard.share = try v.convert(Self.guardShare) }
        if let v = m["date"] { data.date = try v.convert(Self.day) }
        if let v = m["refresh"] { data.refresh = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 1) } }
        if let v = m["max_age"] { data.maxAge = try v.convert { (s) throws(ConfigurationError.Problem) in try Self.duration(s, minimum: 1) } }
        if let v = m["history"] {
            data.history = try v.convert { (s) throws(ConfigurationError.Problem) in
                // The trend needs 14 days; a year of publications is more than any rule counts.
                guard let n = Int(s), (14...366).contains(n) else { throw .init("'\(s)' is not a number of publications from 14 to 366") }
                return n
            }
        }
    }

    mutating func readInputs(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["owntracks", "plain", "traccar", "max_payload", "max_accuracy"])
        if let v = m["owntracks"] { inputs.owntracks = try v.filters() }
        if let v = m["plain"] { inputs.plain = try v.filters() }
        if let v = m["traccar"] { inputs.traccar = try v.filters() }
        if let v = m["max_payload"] {
            inputs.maxPayload = try v.convert { (s) throws(ConfigurationError.Problem) in
                guard let n = Int(s), (64...10_000_000).contains(n) else { throw .init("'\(s)' is not a byte count from 64 to 10000000") }
                return n
            }
        }
        if let v = m["max_accuracy"] {
            inputs.maxAccuracy = try v.unlessOff { (s) throws(ConfigurationError.Problem) in
                guard let n = Int(s), (1...10_000_000).contains(n) else { throw .init("'\(s)' is not a distance in whole metres from 1 to 10000000, or false") }
                return n
            }
        }
    }

    mutating func readDevices(_ m: MappingReader) throws(ConfigurationError) {
        for entry in m.entries {
            // The one setting of all devices; a device's own settings are a mapping, never a scalar.
            if entry.key == "forget_after", !Self.isMapping(entry.value) {
                forgetAfter = try entry.value.unlessOff { (s) throws(ConfigurationError.Problem) in
                    let duration = try Self.duration(s)
                    return duration == .zero ? nil : duration
                } ?? nil
                continue
            }
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

    static func isMapping(_ value: ValueReader) -> Bool {
        if case .mapping = value.node { return true }
        return value.isNull
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
        guard let value = Self.boolean(text) else { throw error("expected true or false, got '\(text)'") }
        return value
    }

    /// The YAML 1.1 spellings of a boolean the configuration takes, in any case; `nil` for others.
    static func boolean(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "yes", "on": true
        case "false", "no", "off": false
        default: nil
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

    /// `nil` for `false` (or `off`, `no`, null): a limit switched off; otherwise the value parsed.
    func unlessOff<T>(_ parse: (String) throws(ConfigurationError.Problem) -> T) throws(ConfigurationError) -> T? {
        if isNull { return nil }
        if let flag = try? bool(), flag == false { return nil }
        return try convert(parse)
    }

    /// One topic filter, a list of them, or `false`/null/`[]` for none.
    func filters() throws(ConfigurationError) -> [MQTTTopicFilter] {
        if isNull { return [] }
        switch node {
        case .scalar:
            if let flag = try? bool(), flag == false { return [] }
            return [try filter(self)]
        case .sequence(let sequence):
            var result: [MQTTTopicFilter] = []
            for (index, item) in sequence.enumerated() {
                result.append(try filter(ValueReader(node: item, path: "\(path)[\(index)]")))
            }
            return result
        default:
            throw error("expected a topic filter or a list of them")
        }
    }

    private func filter(_ value: ValueReader) throws(ConfigurationError) -> MQTTTopicFilter {
        try value.convert { (s) throws(ConfigurationError.Problem) in
            guard let filter = try? MQTTTopicFilter(s) else { throw .init("'\(s)' is not a valid MQTT topic filter") }
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
