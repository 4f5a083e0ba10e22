import AmpelData
import AmpelCore
import AmpelDomain
import AmpelMQTT
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// The running daemon: intake, signal engine, publishing, persistence, bridge topics.
///
/// One loop owns the engine: broker messages, data refreshes and a flush tick are merged
/// into one stream and handled in order, so the state machine needs no lock. It is a
/// `Service`: on graceful shutdown (SIGTERM, SIGINT) it stops the intake, handles what it
/// already has, writes the state, publishes `offline` and disconnects.
actor AmpelDaemon: Service {
    static let version = AmpelVersion.current

    let configuration: DaemonConfiguration
    let ruleSet: RuleSet
    let locator: any Locator
    let feed: any DatasetFeed
    let transport: any DaemonTransport
    let store: StateStore
    let saver: StateSaver
    /// What the runs may have announced to Home Assistant (``DiscoveryScopeFile``).
    let discoveryScopes: DiscoveryScopeFile
    /// The shape of the states retained on the broker (``PublishedShapeFile``).
    let publishedShapes: PublishedShapeFile
    let logger: Logger
    let now: @Sendable () -> Date
    let limits: DaemonLimits
    /// The state read by ``DaemonRuntime/prepare(_:)``; `nil` to read it at start.
    let restored: PersistedState?
    /// The state lost at start (file moved aside, or missing under a journal that continues
    /// from it) and what was rebuilt from the broker, for `bridge/info`.
    var stateRecovery: StateRecovery?

    let intake: Intake
    /// `notify.webhooks`: the loop only queues alerts for them (``Webhooks``).
    let webhooks: Webhooks
    let parser: InputParser
    let topics: Topics

    /// What the HTTP server reads (``StatusView``): handed over at each tick.
    let status: StatusView
    /// The latency histograms of `/metrics`; `nil` records nothing.
    let metrics: DaemonMetrics?
    var subscribed = false
    var feedState: FeedState?
    let gate: IntakeGate
    /// A requested stop, and when it stops handling messages (the rest waits in the journal).
    let stopping = StopRequest()
    /// When the tick's chores are due.
    var housekeeping: Housekeeping
    /// What the daemon counts and tells about itself.
    var report = DaemonReport()
    /// CONNACKs handled so far.
    var connections = 0
    /// The waits for the broker between two batches of a walk and before recording removed
    /// discovery configs as done; the stop ends them all before it says offline.
    let probes: BrokerProbes

    /// - Parameters:
    ///   - restored: the state file's content, when the caller has read it already; `nil` reads it at start.
    ///   - limits: the bounds and timings (``DaemonLimits``).
    init(configuration: DaemonConfiguration, ruleSet: RuleSet, locator: any Locator, feed: any DatasetFeed,
                transport: any DaemonTransport, logger: Logger, restored: PersistedState? = nil, limits: DaemonLimits = DaemonLimits(),
                now: @escaping @Sendable () -> Date = { Date() }, stateRecovery: StateRecovery? = nil,
                webhooks: Webhooks? = nil, status: StatusView? = nil, metrics: DaemonMetrics? = nil) {
        // One clock for the refusals' stamps and /readyz's window: the daemon's.
        self.status = status ?? StatusView(clock: { now().timeIntervalSince1970 })
        self.metrics = metrics
        self.webhooks = webhooks ?? Webhooks(configuration.notify.webhooks, logger: logger)
        self.stateRecovery = stateRecovery
        var limits = limits
        // The loop waits for half of them: at least one must be awaited.
        limits.outgoing = max(2, limits.outgoing)
        self.limits = limits
        gate = IntakeGate(limit: limits.intake, transport: transport)
        self.configuration = configuration
        self.ruleSet = ruleSet
        self.locator = locator
        self.feed = feed
        self.transport = transport
        self.store = StateStore(directory: configuration.stateDirectory)
        self.saver = StateSaver(store: store, logger: logger)
        discoveryScopes = DiscoveryScopeFile(directory: configuration.stateDirectory)
        publishedShapes = PublishedShapeFile(directory: configuration.stateDirectory)
        self.logger = logger
        self.now = now
        housekeeping = Housekeeping(forgetAfter: configuration.forgetAfter, tick: limits.tick)
        self.restored = restored
        intake = Intake(configuration: configuration)
        parser = InputParser(maxPayload: configuration.inputs.maxPayload)
        topics = configuration.topics
        probes = BrokerProbes(transport: transport, topics: topics)
    }

    /// The engine's settings from the configuration, and what earlier runs announced to Home Assistant.
    static func settings(_ configuration: DaemonConfiguration, ruleSet: RuleSet, announcedDiscovery: [DiscoveryScope] = [],
                         publishedShape: PublishedShape? = nil) -> SignalEngine.Settings {
        let topics = configuration.topics
        let homeAssistant = configuration.homeAssistant
        var settings = SignalEngine.Settings(
            ruleSet: ruleSet, region: ruleSet.region, topics: topics, defaultLanguage: configuration.language,
            devices: configuration.devices,
            // Message expiry exists only in MQTT 5: decided here once, so every later step passes it on unchecked.
            alertExpiry: configuration.mqtt.protocolVersion == .v311 ? nil : configuration.alerts.expiry,
            lamps: configuration.lamps,
            discovery: homeAssistant.discovery
                ? Discovery(prefix: homeAssistant.prefix, topics: topics, version: version, ruleSet: ruleSet, devices: homeAssistant.devices,
                            form: homeAssistant.form) : nil,
            announcedDiscovery: announcedDiscovery, publishedShape: publishedShape,
            owntracks: configuration.notify.owntracks ? OwnTracksNotices(deviceLevel: configuration.notify.owntracksDevice) : nil,
            maxFixAge: configuration.alerts.maxFixAge, maxAccuracy: configuration.inputs.maxAccuracy.map(Double.init),
            minDwell: configuration.alerts.minDwell, webhooks: configuration.notify.webhooks, forgetAfter: configuration.forgetAfter,
            outputs: configuration.outputs)
        settings.publishDistricts = configuration.outputs.districts
        return settings
    }

    /// What exists only while the daemon runs: built once by ``start()`` and owned by the loop,
    /// which hands it to each step (no part of it is there before the start or after the stop).
    struct Running {
        var engine: SignalEngine
        /// Opened by the start, continuing what the last run left.
        let journal: Journal
        /// Carries out the engine's actions against the journal, the broker and the webhooks.
        let executor: ActionExecutor
        /// The loop's input queue, for what the daemon queues for itself (the next batch of a walk).
        let inputs: AsyncStream<Input>.Continuation
    }

    enum Input: Sendable {
        /// A message from the broker with its journal sequence number and arrival time.
        case message(MQTTMessage, seq: UInt64, receivedAt: Int)
        case feed(FeedState)
        case tick
        case stop
        /// A CONNACK: the first answers the start's connect, every later one is a reconnect.
        case connected(sessionPresent: Bool)
        /// The next batch of a recovery after a reconnect (queued behind what waits now).
        case recover(generation: Int)
        /// The next batch of a re-evaluation after new data (queued behind what waits now).
        case reevaluate(generation: Int)
    }

    /// Stops the daemon as a graceful shutdown would (for use outside a `ServiceGroup`).
    nonisolated func stop() {
        requestStop()
        stopping.wake()
    }

    /// The first step of every stop: take nothing more from the socket and give the messages
    /// already taken ``DaemonLimits/drain`` to be handled.
    nonisolated func requestStop() {
        guard stopping.request(drain: limits.drain) else { return }
        gate.stopTaking()
    }

    /// Starts, runs the loop until a stop, and stops: each part in its own file (Daemon+Start,
    /// Daemon+Loop, Daemon+Stop).
    func run() async throws {
        guard let started = try await start() else { return }
        var run = started.run
        let producers = startProducers(run.inputs)
        gate.loopStarted()
        // From here on the stop below always runs, which shuts the webhooks' client down; the
        // alerts of the start are queued already and go first.
        webhooks.start()
        // On the MQTT client's executor a message is handled on the thread that read it (decision 27).
        var loopExecutor = transport.loopExecutor
        #if AMPEL_FAULT_INJECTION
        if FaultInjection.crashesAfterAlerts { loopExecutor = nil }
        #endif
        await withTaskExecutorPreference(loopExecutor) {
            await loop(started.events, &run)
        }
        await finish(run, producers: producers)
    }
}
