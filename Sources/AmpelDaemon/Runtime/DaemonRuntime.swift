import AmpelData
import AmpelDomain
import AmpelMQTT
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

/// The composition root of `ampel run`: configuration → rule set → geometry → data → MQTT → daemon.
///
/// Nothing else knows all the parts. ``prepare(_:)`` does everything that can fail because of
/// the configuration, so a bad one is reported before anything connects.
package enum DaemonRuntime {
    /// The parts built from a valid configuration, not yet connected.
    package struct Prepared: Sendable {
        let configuration: DaemonConfiguration
        let ruleSet: RuleSet
        let locator: any Locator
        let feed: any DatasetFeed
        /// The state file as read while checking the state directory: the daemon starts from it
        /// rather than reading it again.
        let restored: PersistedState
        /// Set when the state file could not be read and was moved aside: the daemon starts
        /// from the journal and the broker's retained states, and says so in `bridge/info`.
        let stateRecovery: StateRecovery?

        /// The hospital and intensive-care files a set of state indicators reads.
        var dataFiles: String {
            let data = configuration.data
            guard data.source == .rki else { return " (bundled hospital and intensive-care files)" }
            return " hospitalisation \(data.hospitalisationURL ?? RKIIndicatorClient.defaultHospitalisationURL), intensive care \(data.icuURL ?? RKIIndicatorClient.defaultICUURL)"
        }

        /// The effective configuration in a few lines, for `--check-config`.
        package var summary: String {
            let c = configuration
            var lines = [
                "broker: \(c.broker)",
                "client id: \(c.mqtt.clientID) (MQTT \(c.mqtt.protocolVersion.configurationName))",
                "base topic: \(c.baseTopic)",
                "state dir: \(c.stateDirectory)",
                "language: \(c.language.rawValue)",
                "rule set: \(ruleSet.id)",
                "data: \(c.data.source.rawValue)\(ruleSet.readsStateIndicators ? dataFiles : c.data.url.map { " \($0)" } ?? "")\(c.data.date.map { " on or before \($0.iso)" } ?? ""), refresh \(c.data.refresh.components.seconds) s, max age \(c.data.maxAge.components.seconds) s",
                "inputs: owntracks \(c.inputs.owntracks.map(\.filter)), plain \(c.inputs.plain.map(\.filter)), traccar \(c.inputs.traccar.map(\.filter)), max accuracy \(c.inputs.maxAccuracy.map { "\($0) m" } ?? "off")",
                "alerts: expiry \(c.alerts.expiry.components.seconds) s, max fix age \(c.alerts.maxFixAge.map { "\($0.components.seconds) s" } ?? "off"), min dwell \(c.alerts.minDwell)",
                "devices configured: \(c.devices.count)",
                "home assistant discovery: \(c.homeAssistant.discovery ? "on, prefix \(c.homeAssistant.prefix), \(c.homeAssistant.devices ? "districts and devices" : "districts only")" : "off")",
                "owntracks notices: \(c.notify.owntracks ? "on, as device \(c.notify.owntracksDevice)" : "off")",
                "http: \(c.http.listen.map { "http://\($0)/\(c.http.auth.isConfigured ? ", auth \([c.http.auth.token != nil ? "bearer" : nil, c.http.auth.basic != nil ? "basic" : nil].compactMap { $0 }.joined(separator: " and "))" : ", no auth")\(c.http.showPositions ? ", positions shown" : "")" } ?? "off")",
                "devices forgotten after: \(c.forgetAfter.map { "\($0.components.seconds) s" } ?? "never")",
            ]
            for lamp in c.lamps {
                let follows = switch lamp.follows {
                case .district(let ags): "district \(ags)"
                case .device(let key): "device \(key)"
                }
                lines.append("lamp \(lamp.name): \(lamp.driver.rawValue) \(lamp.topic), follows \(follows)")
            }
            for webhook in c.notify.webhooks {
                func selection(_ s: WebhookSettings.Selection) -> String {
                    switch s {
                    case .all: "all"
                    case .none: "none"
                    case .only(let keys): keys.sorted().joined(separator: " ")
                    }
                }
                lines.append("webhook \(webhook.name): \(webhook.url), devices \(selection(webhook.devices)), districts \(selection(webhook.districts)), language \(webhook.language?.rawValue ?? "of the alert")")
            }
            return lines.joined(separator: "\n")
        }
    }

    /// Builds every part that the configuration decides, without connecting to anything.
    ///
    /// - Throws: ``ConfigurationError`` for a rule set, state directory or data choice that cannot work.
    ///
    /// - Parameter feed: the data feed instead of the configured source's (`ampel replay`).
    package static func prepare(_ configuration: DaemonConfiguration,
                               feed makeFeed: ((RuleSet) throws -> any DatasetFeed)? = nil) throws -> Prepared {
        ProcessMemory.configureHeap()
        let ruleSet = try loadRuleSet(configuration.rules)
        let store = StateStore(directory: configuration.stateDirectory)
        let restored: PersistedState
        let recovery: StateRecovery?
        let logger = Logger(label: "ampel.state")
        do {
            try store.prepare()
            for path in store.removeLeftovers() {
                logger.warning("removed a temporary file left by a write that did not finish", metadata: ["path": "\(path)"])
            }
            let loaded = try store.loadRecovering()
            restored = loaded.state
            recovery = loaded.recovery
        } catch {
            // Only a state directory that cannot be created or written ends here: the
            // deployment's `state_dir` is wrong, a configuration error (exit 78).
            throw ConfigurationError(key: "state_dir", line: nil, message: error.message)
        }
        if let recovery {
            logger.error("the state file could not be read and was moved aside; rebuilding device phases from the broker's retained states before alerting anyone", metadata: [
                "movedTo": "\(recovery.movedTo ?? "")", "reason": "\(recovery.reason)",
            ])
        }
        let data = configuration.data
        // Settings the rule set in force does not read are said, not silently dropped.
        if ruleSet.readsStateIndicators, data.url != nil {
            logger.warning("data.url is the incidence file; rule set \(ruleSet.id) reads data.hospitalisation_url and data.icu_url")
        } else if !ruleSet.readsStateIndicators, data.hospitalisationURL != nil || data.icuURL != nil {
            logger.warning("data.hospitalisation_url and data.icu_url are read only by a rule set of state indicators (krankenhausampel-2021, hospitalisierung-2021), not by \(ruleSet.id)")
        } else if ruleSet.readsStateIndicators, data.source != .rki, data.hospitalisationURL != nil || data.icuURL != nil {
            logger.warning("data.hospitalisation_url and data.icu_url are read with data.source rki; \(data.source.rawValue) reads the bundled files")
        }
        let locator = try GeoLocator.bundled()
        let feed = try makeFeed.map { try $0(ruleSet) } ?? Self.makeFeed(configuration, ruleSet: ruleSet)
        return Prepared(configuration: configuration, ruleSet: ruleSet, locator: locator, feed: feed, restored: restored,
                        stateRecovery: recovery)
    }

    /// A bundled rule set by name, or a rule-set file by path.
    static func loadRuleSet(_ nameOrPath: String) throws(ConfigurationError) -> RuleSet {
        do {
            if RuleSetCatalog.bundledNames.contains(nameOrPath) {
                return try RuleSetCatalog.bundled(nameOrPath)
            }
            guard let data = FileManager.default.contents(atPath: nameOrPath) else {
                throw ConfigurationError(key: "rules", line: nil, message: "'\(nameOrPath)' is neither a bundled rule set (\(RuleSetCatalog.bundledNames.joined(separator: ", "))) nor a readable file")
            }
            return try RuleSet.decode(data, name: nameOrPath)
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError(key: "rules", line: nil, message: "\(error)")
        }
    }

    /// The data feed; for a bundled source the chosen day is checked now, so a day before the
    /// first bundled publication is a configuration error.
    static func makeFeed(_ configuration: DaemonConfiguration, ruleSet: RuleSet) throws(ConfigurationError) -> any DatasetFeed {
        do {
            try StateIndicators.checkProvided(ruleSet)
        } catch {
            throw ConfigurationError(key: "rules", line: nil, message: error.message)
        }
        do {
            switch configuration.data.source {
            case .snapshot where ruleSet.readsStateIndicators, .bundled where ruleSet.readsStateIndicators:
                _ = try BundledIndicatorSource(day: configuration.data.date, region: ruleSet.region).load()
            case .snapshot: _ = try BundledData.shared.snapshot(on: configuration.data.date)
            case .history: _ = try BundledData.shared.history(on: configuration.data.date)
            case .bundled: _ = try BundledData.shared.dataset(on: configuration.data.date)
            case .rki, .arcgis: break
            }
        } catch {
            throw ConfigurationError(key: "data.date", line: nil, message: "\(error)")
        }
        return try RefresherFeed.make(configuration, ruleSet: ruleSet)
    }

    /// Connects and runs the daemon until SIGTERM or SIGINT.
    ///
    /// The HTTP server (`http.listen`) runs beside it as a second service: it stops first on a
    /// graceful shutdown, and a server that cannot listen stops the daemon with an error.
    package static func run(_ prepared: Prepared, logger: Logger) async throws {
        // Without a server nobody reads the histograms: the loop then records none.
        let metrics = prepared.configuration.http.listen == nil ? nil : DaemonMetrics()
        let daemon = try makeDaemon(prepared, logger: logger, metrics: metrics)
        // The group stops its services in reverse order: the daemon comes last so that a SIGTERM
        // stops its intake at once (decision 45) instead of after the HTTP server has closed;
        // the server keeps answering until the daemon is done.
        var services: [any Service] = []
        guard let listen = prepared.configuration.http.listen else {
            try await ServiceGroup(services: [daemon], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger).run()
            return
        }
        let context = HTTPRoutes.Context(view: daemon.status, locator: prepared.locator, configuration: prepared.configuration, metrics: metrics)
        // The daemon connects to the broker only once the server listens: a port in use must
        // stop the start before anything reaches the broker (a failed start that had taken
        // over the session and republished every topic left the running daemon's broker
        // rewritten, and systemd restarting it in a loop did it again each time).
        let (listening, opened) = AsyncStream<Void>.makeStream()
        services.append(HTTPServer.make(context, address: listen, logger: Logger(label: "ampel.http"), listening: {
            opened.yield()
            opened.finish()
        }))
        services.append(AfterListening(daemon, listening: listening))
        // A daemon that fails (a broker refusing its password, exit 78) shuts the server down
        // gracefully: cancelled, it logged two errors of its own before the reason.
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services.map { .init(service: $0, failureTerminationBehavior: .gracefullyShutdownGroup) },
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch let error as IOError {
            throw Self.listenError(error, address: listen) ?? error
        }
    }

    /// A failed bind of `http.listen` in the words of a configuration error (exit 78).
    static func listenError(_ error: IOError, address: HTTPListenAddress) -> ConfigurationError? {
        let problem: String
        switch error.errnoCode {
        case EADDRINUSE: problem = "\(address) is in use"
        case EACCES: problem = "\(address): permission denied (ports below 1024 need privileges)"
        case EADDRNOTAVAIL: problem = "\(address) is not an address of this machine"
        default: return nil
        }
        return ConfigurationError(key: "http.listen", line: nil, message: problem)
    }

    /// Runs `wrapped` once `listening` has yielded; returns without running it when the group
    /// stops first (the server could not listen, or a signal came).
    struct AfterListening<Wrapped: Service>: Service {
        let wrapped: Wrapped
        let listening: AsyncStream<Void>

        init(_ wrapped: Wrapped, listening: AsyncStream<Void>) {
            self.wrapped = wrapped
            self.listening = listening
        }

        func run() async throws {
            let listening = self.listening
            let opened = try? await cancelWhenGracefulShutdown {
                var iterator = listening.makeAsyncIterator()
                return await iterator.next() != nil
            }
            guard opened == true, !Task.isCancelled else { return }
            try await wrapped.run()
        }
    }

    /// The daemon, not yet running, on a real MQTT client unless a test gives its own `transport`.
    static func makeDaemon(_ prepared: Prepared, logger: Logger, limits: DaemonLimits = DaemonLimits(),
                                  metrics: DaemonMetrics? = nil, transport: (any DaemonTransport)? = nil) throws -> AmpelDaemon {
        let transport = try transport ?? MQTTClient(configuration: MQTTClient.daemonConfiguration(prepared.configuration), logger: logger)
        return AmpelDaemon(configuration: prepared.configuration, ruleSet: prepared.ruleSet, locator: prepared.locator,
                           feed: prepared.feed, transport: transport, logger: logger, restored: prepared.restored,
                           limits: limits, stateRecovery: prepared.stateRecovery, metrics: metrics)
    }
}
