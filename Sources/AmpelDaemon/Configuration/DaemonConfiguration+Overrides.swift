/// Values given on the command line or in the environment; they win over the file.
///
/// They stay text until ``DaemonConfiguration/load(yaml:environment:flags:)`` parses them, so
/// a bad flag is reported like a bad key: named, with the same message.
package struct ConfigurationOverrides: Sendable, Hashable {
    var broker: String?
    var source: String?
    var url: String?
    /// `--hospitalisation-url`, `--icu-url`: `data.hospitalisation_url`, `data.icu_url`.
    var hospitalisationURL: String?
    var icuURL: String?
    var date: String?
    var stateDir: String?
    var refresh: String?
    var lang: String?
    var logLevel: String?
    /// `--http`: `http.listen` (`host:port`, or `false`).
    var http: String?
    var rules: String?

    package init(broker: String? = nil, source: String? = nil, url: String? = nil, date: String? = nil,
                stateDir: String? = nil, refresh: String? = nil, lang: String? = nil, logLevel: String? = nil,
                http: String? = nil, rules: String? = nil, hospitalisationURL: String? = nil, icuURL: String? = nil) {
        self.hospitalisationURL = hospitalisationURL
        self.icuURL = icuURL
        self.http = http
        self.rules = rules
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
        ("--hospitalisation-url", "AMPEL_HOSPITALISATION_URL", \.hospitalisationURL),
        ("--icu-url", "AMPEL_ICU_URL", \.icuURL),
        ("--date", "AMPEL_DATE", \.date),
        ("--state-dir", "AMPEL_STATE_DIR", \.stateDir),
        ("--refresh", "AMPEL_REFRESH", \.refresh),
        ("--lang", "AMPEL_LANG", \.lang),
        ("--log-level", "AMPEL_LOG_LEVEL", \.logLevel),
        ("--http", "AMPEL_HTTP", \.http),
        ("--rules", "AMPEL_RULES", \.rules),
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
    package static func load(yaml: String?, environment: [String: String] = [:], flags: ConfigurationOverrides = .init()) throws(ConfigurationError) -> DaemonConfiguration {
        var config = DaemonConfiguration()
        config.stateDirectory = defaultStateDirectory(environment: environment)
        if let yaml {
            try config.read(yaml: yaml)
        }
        // Secrets by variable only: a password on the command line shows in `ps`.
        if let user = environment["AMPEL_MQTT_USERNAME"], !user.isEmpty { config.mqtt.username = user }
        if let password = environment["AMPEL_MQTT_PASSWORD"], !password.isEmpty { config.mqtt.password = password }
        if let token = environment["AMPEL_HTTP_TOKEN"], !token.isEmpty { config.http.auth.token = token }
        if let user = environment["AMPEL_HTTP_USERNAME"], !user.isEmpty { config.http.auth.username = user }
        if let password = environment["AMPEL_HTTP_PASSWORD"], !password.isEmpty { config.http.auth.password = password }
        for (flag, variable, path) in ConfigurationOverrides.names {
            if let value = flags[keyPath: path] {
                try config.apply(value, as: flag)
            } else if let value = environment[variable], !value.isEmpty {
                try config.apply(value, as: variable)
            }
        }
        try config.validateHTTP()
        return config
    }

    /// Applies one flag or variable.
    mutating func apply(_ value: String, as name: String) throws(ConfigurationError) {
        do throws(ConfigurationError.Problem) {
            switch name {
            case "--broker", "AMPEL_BROKER": broker = try Self.broker(value)
            case "--source", "AMPEL_SOURCE": data.source = try Self.dataSource(value)
            case "--url", "AMPEL_URL": data.url = try Self.dataURL(value)
            case "--hospitalisation-url", "AMPEL_HOSPITALISATION_URL": data.hospitalisationURL = try Self.dataURL(value)
            case "--icu-url", "AMPEL_ICU_URL": data.icuURL = try Self.dataURL(value)
            case "--date", "AMPEL_DATE": data.date = try Self.day(value)
            case "--state-dir", "AMPEL_STATE_DIR":
                guard !value.isEmpty else { throw ConfigurationError.Problem("empty path") }
                stateDirectory = value
            case "--refresh", "AMPEL_REFRESH": data.refresh = try Self.duration(value, minimum: 1)
            case "--lang", "AMPEL_LANG":
                language = try Self.language(value)
                languageConfigured = true
            case "--log-level", "AMPEL_LOG_LEVEL": logLevel = try Self.logLevel(value)
            case "--http", "AMPEL_HTTP":
                let off = ["false", "off", "no"].contains(value.lowercased())
                http.listen = off ? nil : try Self.listenAddress(value)
            case "--rules", "AMPEL_RULES":
                guard !value.isEmpty else { throw ConfigurationError.Problem("empty rule set") }
                rules = value
            default: throw ConfigurationError.Problem("unknown override")
            }
        } catch {
            throw ConfigurationError(key: name, line: nil, message: error.message)
        }
    }
}
