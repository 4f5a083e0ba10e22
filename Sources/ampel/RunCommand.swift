import AmpelDaemon
import AmpelData
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
            The flags below and the matching AMPEL_* variables (AMPEL_BROKER, AMPEL_SOURCE, …) win over the file; \
            the defaults shown apply where neither sets a value. \
            Every key is described in docs/configuration.md, every topic in docs/topics.md. \
            SIGTERM and SIGINT shut down gracefully. An invalid configuration exits with code 78 before connecting.

            Example:
              ampel run --broker mqtt://127.0.0.1:1883 --source bundled --lang de
            """)

    @OptionGroup var daemon: DaemonOptions

    @Option(name: .long, help: DaemonHelp.source)
    var source: String?

    @Option(name: .long, help: "For --source rki: the district file, http(s):// or file://; for --source arcgis: the query endpoint of a mirror (default: the source's own, for rki the RKI's file on GitHub).")
    var url: String?

    @Option(name: .customLong("hospitalisation-url"), help: "For a rule set of state indicators with --source rki: the RKI's hospitalisation file, http(s):// or file:// (default: the RKI's file on GitHub).")
    var hospitalisationURL: String?

    @Option(name: .customLong("icu-url"), help: "For a rule set of state indicators with --source rki: the DIVI register's state file, http(s):// or file:// (default: the RKI's file on GitHub).")
    var icuURL: String?

    @Option(name: .long, help: "For bundled, snapshot and history: the latest publication on or before this day, YYYY-MM-DD (default: the latest).")
    var date: String?

    @Option(name: .customLong("state-dir"), help: DaemonHelp.stateDir)
    var stateDir: String?

    @Option(name: .long, help: "How often to check for new data: seconds, or 10m, 1h (default: \(DaemonHelp.duration(DaemonHelp.defaults.data.refresh))).")
    var refresh: String?

    @Option(name: .long, help: "Where the HTTP server listens (host:port), or false for none (default: \(DaemonHelp.defaults.http.listen.map { "\($0)" } ?? "false")).")
    var http: String?

    @Flag(name: .customLong("check-config"), help: "Validate the configuration, print it, and exit without connecting.")
    var checkConfig = false

    func run() async throws {
        let flags = ConfigurationOverrides(broker: daemon.broker, source: source, url: url, date: date, stateDir: stateDir,
                                           refresh: refresh, lang: daemon.lang, logLevel: daemon.logLevel, http: http, rules: daemon.rules,
                                           hospitalisationURL: hospitalisationURL, icuURL: icuURL)
        let prepared = try Self.prepare(config: daemon.config, flags: flags)
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
            if let former = formerStateDirectory(in: configuration, environment: environment) {
                Logger(label: "ampel").warning("\(former) holds a state that this run does not use: ./ampel-state is no longer the default state directory; name it to keep that state (--state-dir ampel-state, state_dir: ampel-state or AMPEL_STATE_DIR)", metadata: [
                    "stateDir": "\(configuration.stateDirectory)",
                ])
            }
            return try DaemonRuntime.prepare(configuration, feed: feed)
        } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(78)
        }
    }

    /// `./ampel-state` when it holds a daemon's state (its snapshot or journal) while the
    /// configuration keeps the default state directory elsewhere: a daemon that relied on the
    /// former default would otherwise start from nothing without a word.
    static func formerStateDirectory(in configuration: DaemonConfiguration, environment: [String: String]) -> String? {
        let former = URL(fileURLWithPath: StateDirectory.formerDaemonDefault, isDirectory: true).standardizedFileURL
        let inUse = URL(fileURLWithPath: configuration.stateDirectory, isDirectory: true).standardizedFileURL
        guard configuration.stateDirectory == DaemonConfiguration.defaultStateDirectory(environment: environment),
              inUse.path != former.path,
              let names = try? FileManager.default.contentsOfDirectory(atPath: former.path),
              names.contains(where: { $0 == "state.json" || $0.hasPrefix("journal-") }) else { return nil }
        return former.path
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
        } catch let error as StateStoreError where error.noRoom {
            // EX_CANTCREAT: systemd's RestartPreventExitStatus keeps it from a restart loop
            // that cannot find more room either.
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(73)
        } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// The flags `run` and `replay` share: the same names, help and defaults.
struct DaemonOptions: ParsableArguments {
    @Option(name: .long, help: "The YAML configuration file (default: $AMPEL_CONFIG, else none).")
    var config: String?

    @Option(name: .long, help: DaemonHelp.broker)
    var broker: String?

    @Option(name: .long, help: DaemonHelp.rules)
    var rules: String?

    @Option(name: .long, help: DaemonHelp.lang)
    var lang: String?

    @Option(name: .customLong("log-level"), help: DaemonHelp.logLevel)
    var logLevel: String?
}

/// The help of the daemon's flags that `run` and `replay` share, with the defaults of
/// ``DaemonConfiguration`` itself, so that the help cannot name another default than the one in force.
enum DaemonHelp {
    static let defaults = DaemonConfiguration()

    static let broker: ArgumentHelp = "Broker URL: mqtt://host:port, or mqtts://host:port for TLS; the nodes of a cluster comma-separated (default: \(defaults.broker))."
    static let source: ArgumentHelp = "Incidence data, the same sources as check and districts: bundled (snapshots and daily history, the newer on each day), snapshot (the bundled RKI_Landkreisdaten, all of Germany, 2020-10-15 to 2020-11-23), history (the bundled daily values, Bavaria, 2020-11-18 to 2021-11-22), rki (live: the RKI's maintained dataset), arcgis (a mirror of the former ArcGIS layer) (default: \(defaults.data.source.rawValue))."
    static let stateDir: ArgumentHelp = "Where state, journal and data cache are kept, as by fetch, check and districts (default: $AMPEL_STATE_DIR, else $STATE_DIRECTORY, $XDG_STATE_HOME/ampel or ~/.local/state/ampel)."
    static let lang: ArgumentHelp = "Language of district topics and of devices that ask for none: de or en (default: \(defaults.language.rawValue))."
    static let rules: ArgumentHelp = "The rule set: a bundled name (\(RuleSetCatalog.bundledNames.joined(separator: ", "))) or a JSON file (default: \(defaults.rules))."
    static let logLevel: ArgumentHelp = "trace, debug, info, notice, warning, error or critical (default: \(defaults.logLevel))."

    /// `10m`, `1h`, `90s`: as the configuration takes them.
    static func duration(_ value: Duration) -> String {
        let seconds = value.components.seconds
        if seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        if seconds % 60 == 0 { return "\(seconds / 60)m" }
        return "\(seconds)s"
    }
}
