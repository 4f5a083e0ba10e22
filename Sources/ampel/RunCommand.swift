import AmpelDaemon
import AmpelDomain
import ArgumentParser
import Foundation
import Logging

/// `ampel run`: the daemon. Device locations in over MQTT, colours and localized alerts out.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the daemon: device locations in over MQTT, traffic-light colours and localized alerts out.",
        discussion: """
            Reads one YAML file (--config, or AMPEL_CONFIG); without one it runs on defaults: a broker on \
            localhost:1883, the bundled RKI data, OwnTracks on owntracks/+/+ and plain JSON on ampel/location/+. \
            The flags below and the matching AMPEL_* variables (AMPEL_BROKER, AMPEL_SOURCE, …) win over the file. \
            Every key is described in docs/configuration.md, every topic in docs/topics.md. \
            SIGTERM and SIGINT shut down gracefully. An invalid configuration exits with code 78 before connecting.
            """)

    @Option(name: .long, help: "The YAML configuration file (default: AMPEL_CONFIG, else none).")
    var config: String?

    @Option(name: .long, help: "Broker URL: mqtt://host:port, or mqtts://host:port for TLS.")
    var broker: String?

    @Option(name: .long, help: "Incidence data: rki (live: the RKI's maintained dataset, its daily district CSV), arcgis (a mirror of the former ArcGIS layer), snapshot or history (bundled).")
    var source: String?

    @Option(name: .long, help: "For --source rki: the district file, http(s):// or file:// (default: the RKI's file on GitHub); for --source arcgis: the query endpoint of a mirror.")
    var url: String?

    @Option(name: .long, help: "For snapshot and history: the latest publication on or before this day (YYYY-MM-DD).")
    var date: String?

    @Option(name: .customLong("state-dir"), help: "Where state and the data cache are kept.")
    var stateDir: String?

    @Option(name: .long, help: "How often to check for new data: seconds, or 10m, 1h.")
    var refresh: String?

    @Option(name: .long, help: "Default language of texts: de or en.")
    var lang: String?

    @Option(name: .long, help: "The rule set: a bundled name (bavaria, bavaria-initial, notbremse-2021) or a JSON file.")
    var rules: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error, critical.")
    var logLevel: String?

    @Option(name: .long, help: "Where the HTTP server listens (host:port), or false for none (default 127.0.0.1:8080).")
    var http: String?

    @Flag(name: .customLong("check-config"), help: "Validate the configuration, print it, and exit without connecting.")
    var checkConfig = false

    func run() async throws {
        let flags = ConfigurationOverrides(broker: broker, source: source, url: url, date: date, stateDir: stateDir,
                                           refresh: refresh, lang: lang, logLevel: logLevel, http: http, rules: rules)
        let prepared = try Self.prepare(config: config, flags: flags)
        if checkConfig {
            print(prepared.summary)
            return
        }
        try await Self.run(prepared)
    }

    /// Reads the configuration as `ampel run` does (the file, then `AMPEL_*` variables, then
    /// `flags`), sets up logging and builds the daemon's parts; a bad configuration exits 78.
    ///
    /// - Parameters:
    ///   - adjust: changes the loaded configuration before the parts are built.
    ///   - feed: the data feed instead of the configured source's.
    static func prepare(config: String?, flags: ConfigurationOverrides, adjust: (inout DaemonConfiguration) -> Void = { _ in },
                        feed: ((RuleSet) throws -> any DatasetFeed)? = nil) throws -> DaemonRuntime.Prepared {
        let environment = ProcessInfo.processInfo.environment
        do {
            var text: String?
            if let path = config ?? environment["AMPEL_CONFIG"].flatMap({ $0.isEmpty ? nil : $0 }) {
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw ConfigurationError(key: "--config", line: nil, message: "cannot read '\(path)'")
                }
                text = String(decoding: data, as: UTF8.self)
            }
            var configuration = try DaemonConfiguration.load(yaml: text, environment: environment, flags: flags)
            adjust(&configuration)
            // Before anything creates a logger, so every part logs at the configured level.
            let level = configuration.logLevel
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
            return try DaemonRuntime.prepare(configuration, feed: feed)
        } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(78)
        }
    }

    /// Runs the daemon until SIGTERM or SIGINT; a configuration problem only the start finds
    /// (the HTTP port in use) exits 78 before the broker is reached, any other failure 1.
    static func run(_ prepared: DaemonRuntime.Prepared) async throws {
        do {
            try await DaemonRuntime.run(prepared, logger: Logger(label: "ampel"))
        } catch let error as ConfigurationError {
            // Found only when the daemon starts (a port in use), before it reached the broker.
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(78)
        } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}
