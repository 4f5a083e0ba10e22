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
public actor AmpelDaemon: Service {
    public static let version = AmpelVersion.current

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
    let flushInterval: Duration
    /// The state read by ``DaemonRuntime/prepare(_:)``; `nil` to read it at start.
    let restored: PersistedState?
    /// The state lost at start (file moved aside, or missing under a journal that continues
    /// from it) and what was rebuilt from the broker, for `bridge/info`.
    private(set) var stateRecovery: StateRecovery?
    /// How long the read of the broker's retained states may go without a message, and at most.
    let rebuildIdle: Duration = .seconds(10)
    let rebuildLimit: Duration = .seconds(120)

    let intake: Intake
    /// `notify.webhooks`: the loop only queues alerts for them (``Webhooks``).
    let webhooks: Webhooks
    /// The webhook counters last published, so that a delivery refreshes `bridge/info`.
    private var webhookStats: [String: WebhookCounters] = [:]
    /// How long a stop gives the webhooks to deliver what they hold (beside the snapshot and
    /// the goodbye, so it adds to the stop only when the goodbye is quicker).
    let webhookDrainLimit: Duration = .seconds(2)
    let parser: InputParser
    let topics: Topics

    private var counters = Counters()
    /// What the HTTP server reads (``StatusView``): handed over at each tick.
    public let status: StatusView
    /// The latency histograms of `/metrics`; `nil` records nothing.
    let metrics: DaemonMetrics?
    private var recentErrors = StatusView.RecentErrors()
    private var publishedByKind: [SignalEngine.PublishKind: Int] = [:]
    private var subscribed = false
    private var statusGeneration = 0
    private var devicesHanded = (generation: 0, changes: -1)
    /// Device changes persisted so far: whether the table changed since it was last handed over.
    private var deviceChanges = 0
    private var feedState: FeedState?
    /// Set at the start of ``run()``.
    private var journal: Journal!
    let gate: IntakeGate
    /// When a requested stop stops handling messages (the rest waits in the journal).
    private let stopDeadline = Mutex<ContinuousClock.Instant?>(nil)
    private let stopRequested = Atomic<Bool>(false)
    /// Ticks since the journal was last tidied.
    private var ticksSinceTidy = 0
    /// Ticks since the devices were last checked against `devices.forget_after`.
    private var ticksSinceForget = 0
    /// Messages received so far; the tick notes when the count last moved (no clock read per
    /// message). With the device count at the last heap trim.
    private var messagesReceived = 0
    private var intakeSeen = (count: 0, at: ContinuousClock.now)
    private var trimmedAt = (devices: 0, messages: 0, statesWritten: 0)
    /// A new publication was taken in since the last trim: reading it (a 40 MB file in chunks)
    /// and the device walk it started left free pages worth handing back.
    private var dataSinceTrim = false
    /// Messages since the last trim that make a quiet intake worth a trim (a burst's worth).
    static let trimAfterMessages = 10_000
    /// How long the intake must be quiet before free heap pages are given back.
    let trimQuiet: Duration = .seconds(2)
    /// How long a stop keeps handling the messages it has taken (the rest waits in the journal
    /// for the next start) and writing the snapshot: with the goodbye, well inside systemd's
    /// `TimeoutStopSec=20s` on a slow machine.
    let drainLimit: Duration = .seconds(2)
    /// How long a stop waits for the broker to acknowledge `bridge/info` and `offline`.
    let goodbyeTimeout: Duration = .seconds(3)
    /// Messages taken from the broker and not yet handled, at most (``IntakeGate``).
    let intakeLimit: Int
    /// Publishes the broker has not acknowledged, at most, before the loop handles the next
    /// message: libmosquitto holds each one in memory until then, and a burst that produces
    /// publishes faster than the broker takes them would otherwise grow memory without bound
    /// (docs/benchmarks.md, "Bursts"). The loop then waits until half are acknowledged.
    let outgoingLimit: Int
    /// The longest single wait for the broker: ticks, data and a stop queued behind the next
    /// message are not held up longer by a broker that answers slowly or not at all.
    let outgoingWaitLimit: Duration = .seconds(1)
    /// For the crash tests only: `AMPEL_TEST_CRASH_AFTER_ALERTS=N` kills the process with SIGKILL
    /// right after the N-th alert is journaled and before it is handed to the broker, the one
    /// moment a test cannot hit from outside. An alert and its OwnTracks transition are one
    /// journal write and count once.
    let crashAfterAlerts = ProcessInfo.processInfo.environment["AMPEL_TEST_CRASH_AFTER_ALERTS"].flatMap(Int.init)
    private var alertsJournaled = 0
    private var infoDirty = true
    private var dropLog = RateLimiter(interval: 10, burst: 5)
    /// QoS 0 messages shed at the full intake, as far as the log has said (once per tick).
    private var shedLogged = 0
    private var publishLog = RateLimiter(interval: 10, burst: 5)
    private let stopSignal: AsyncStream<Void>.Continuation
    private let stopStream: AsyncStream<Void>
    /// The input queue, for the inputs the daemon queues for itself (recovery batches).
    private var inbox: AsyncStream<Input>.Continuation?
    /// CONNACKs handled so far.
    private var connections = 0
    /// The waits for the broker between two batches of a walk and before recording removed
    /// discovery configs as done; the stop ends them all before it says offline.
    let probes: BrokerProbes

    /// - Parameters:
    ///   - restored: the state file's content, when the caller has read it already; `nil` reads it at start.
    ///   - flushInterval: how often the state is written (if changed) and `bridge/info` refreshed.
    public init(configuration: DaemonConfiguration, ruleSet: RuleSet, locator: any Locator, feed: any DatasetFeed,
                transport: any DaemonTransport, logger: Logger, restored: PersistedState? = nil, flushInterval: Duration = .seconds(1),
                now: @escaping @Sendable () -> Date = { Date() }, stateRecovery: StateRecovery? = nil, intakeLimit: Int = 20_000,
                outgoingLimit: Int = 2_000, webhooks: Webhooks? = nil, status: StatusView = StatusView(), metrics: DaemonMetrics? = nil) {
        self.status = status
        self.metrics = metrics
        self.webhooks = webhooks ?? Webhooks(configuration.notify.webhooks, logger: logger)
        self.stateRecovery = stateRecovery
        self.intakeLimit = intakeLimit
        self.outgoingLimit = max(2, outgoingLimit)
        gate = IntakeGate(limit: intakeLimit, transport: transport)
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
        self.flushInterval = flushInterval
        self.restored = restored
        intake = Intake(configuration: configuration)
        parser = InputParser(maxPayload: configuration.inputs.maxPayload)
        topics = configuration.topics
        probes = BrokerProbes(transport: transport, topics: topics)
        let stop = AsyncStream<Void>.makeStream()
        stopStream = stop.stream
        stopSignal = stop.continuation
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
                ? Discovery(prefix: homeAssistant.prefix, topics: topics, version: version, ruleSet: ruleSet, devices: homeAssistant.devices) : nil,
            announcedDiscovery: announcedDiscovery, publishedShape: publishedShape,
            owntracks: configuration.notify.owntracks ? OwnTracksNotices(deviceLevel: configuration.notify.owntracksDevice) : nil,
            maxFixAge: configuration.alerts.maxFixAge, maxAccuracy: configuration.inputs.maxAccuracy.map(Double.init),
            minDwell: configuration.alerts.minDwell, webhooks: configuration.notify.webhooks, forgetAfter: configuration.forgetAfter,
            outputs: configuration.outputs)
        settings.publishDistricts = configuration.outputs.districts
        return settings
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
    public nonisolated func stop() {
        requestStop()
        stopSignal.yield()
    }

    /// The first step of every stop: take nothing more from the socket and give the messages
    /// already taken ``drainLimit`` to be handled.
    nonisolated func requestStop() {
        guard !stopRequested.exchange(true, ordering: .sequentiallyConsistent) else { return }
        stopDeadline.withLock { $0 = .now + drainLimit }
        gate.stopTaking()
    }


    public func run() async throws {
        try store.prepare()
        let snapshot = try self.restored ?? store.load()
        let replay = JournalReplay.read(directory: store.directory, over: snapshot)
        for damage in replay.damaged {
            logger.warning("journal segment ends in a torn record (the last write of a process that died); read up to it", metadata: ["segment": "\(damage)"])
        }
        if stateRecovery == nil, let lost = Self.lostSnapshot(snapshot, replay: replay) {
            stateRecovery = StateRecovery(movedTo: nil, reason: lost, at: InternetTime.format(secondsSince1970: now().timeIntervalSince1970))
            logger.error("the state file is missing but the journal continues from it; rebuilding device phases from the broker's retained states", metadata: [
                "reason": "\(lost)", "stateDir": "\(store.directory)",
            ])
        }
        let journal = try Journal(directory: store.directory, continuing: replay, logger: logger)
        self.journal = journal
        let gate = self.gate
        let restored = replay.state
        let initial = try await feed.initial()
        feedState = initial
        let announced = discoveryScopes.announced(prefix: configuration.homeAssistant.prefix, topics: topics,
                                                  firstRun: restored.devices.count == 0 && restored.districts.isEmpty)
        if let problem = announced.problem {
            logger.warning("the record of what was announced to Home Assistant cannot be read; going by the state instead (nothing on a first run, else the configured prefix with devices)",
                           metadata: ["problem": "\(problem)"])
        }
        let published = publishedShapes.published()
        if let problem = published.problem {
            logger.warning("the record of the published states cannot be read; every device state goes out again", metadata: ["problem": "\(problem)"])
        }
        var engine = SignalEngine(settings: Self.settings(configuration, ruleSet: ruleSet, announcedDiscovery: announced.scopes,
                                                          publishedShape: published.shape), dataset: initial.dataset,
                                  stale: initial.stale, restored: restored)
        logger.info("starting", metadata: [
            "data": "\(initial.dataset.source) \(initial.dataset.date.iso)", "stale": "\(initial.stale)",
            "devices": "\(restored.devices.count)", "ruleSet": "\(ruleSet.id)", "stateDir": "\(store.directory)",
        ])
        if configuration.mqtt.protocolVersion == .v311 {
            // What MQTT 5 would give and 3.1.1 cannot: said once, never lost silently.
            logger.notice("MQTT 3.1.1: alerts go without message expiry and the session without expiry", metadata: [
                "alertExpiry": "alerts.expiry \(configuration.alerts.expiry) is not applied: a subscriber's persistent session may deliver an alert long after its phase",
                "sessionExpiry": "mqtt.session_expiry \(configuration.mqtt.sessionExpiry) is not applied: the broker keeps the daemon's session until it removes it",
            ])
            let inputs = configuration.inputs
            let shared = (inputs.owntracks + inputs.plain + inputs.traccar).map(\.filter).filter { $0.hasPrefix("$share/") }
            if !shared.isEmpty {
                logger.warning("MQTT 3.1.1 has no shared subscriptions: some brokers (mosquitto) still treat $share/ as one, others (nats-server) as a plain topic, and then these inputs receive nothing", metadata: [
                    "filters": "\(shared)",
                ])
            }
        }
        if replay.found {
            logger.info("journal replayed", metadata: [
                "records": "\(replay.records)", "unhandled": "\(replay.pendingInputs.count)",
                "unacknowledgedAlerts": "\(replay.pendingAlerts.count)", "alertsWithoutDecision": "\(replay.alertsWithoutDecision)",
                "cleanStop": "\(replay.cleanStop)",
            ])
        }

        // One queue for everything the engine reacts to, in order. The transport hands each
        // message straight to it from the MQTT network thread (set before connecting, so that
        // nothing the session kept for the daemon passes by).
        let (events, continuation) = AsyncStream<Input>.makeStream()
        inbox = continuation
        // What the last run took from the broker but did not handle comes first, in order.
        for input in replay.pendingInputs {
            gate.taken(bytes: input.message.payload.count)
            continuation.yield(.message(input.message, seq: input.seq, receivedAt: input.receivedAt))
        }
        // Into the journal before anything else: libmosquitto has acknowledged it already.
        let now = self.now
        let witnesses = AlertWitnesses()
        let retained = RetainedStates(topics: topics, clientID: configuration.mqtt.clientID)
        transport.deliver { message in
            if witnesses.take(message) || retained.take(message) { return }
            // Past the intake's bound a QoS 0 fix is shed here, counted, never journaled.
            if gate.sheds(qos0: message.qos == .atMostOnce) { return }
            let receivedAt = Int(now().timeIntervalSince1970)
            let seq = journal.appendInput(message, receivedAt: receivedAt)
            gate.taken(bytes: message.payload.count)
            continuation.yield(.message(message, seq: seq, receivedAt: receivedAt))
        }
        let status = self.status
        transport.connections {
            status.connected.store(true, ordering: .relaxed)
            status.brokerError.withLock { $0 = nil }
            continuation.yield(.connected(sessionPresent: $0))
        }
        transport.disconnections { status.connected.store(false, ordering: .relaxed) }

        // The data is loaded: `/readyz` and the page say so, and why the broker is not
        // there yet, instead of "data not loaded" while the connect is retried. Readiness
        // only: the districts' signals come with the start, and the page waits for them.
        publishReadiness()
        guard try await connect() else {
            logger.info("stopped before the broker answered")
            continuation.finish()
            return
        }
        // Subscribe first: what arrives during the start-up publishing waits in the queue.
        let filters = intake.subscriptions
        try await transport.subscribe(filters)
        logger.info("subscribed", metadata: ["filters": "\(filters.joined(separator: " "))"])
        subscribed = true
        if stateRecovery == nil {
            // A read cut short by a crash leaves its QoS 0 subscriptions in the persistent
            // session, and every state the daemon publishes would come back to it as an input.
            // Before `online`: whoever sees `online` may stop or freeze the broker, and this
            // round trip must not be left waiting then.
            try? await transport.unsubscribe(retained.filters)
        }
        try await transport.publish(OutgoingMessage(topic: topics.bridgeState, text: BridgeState.online, qos: 1, retain: true))
        if stateRecovery != nil {
            await rebuild(from: retained, &engine)
        }
        // Alerts decided before a crash that the broker never acknowledged: those it did not
        // take after all (no witness retained) go again.
        if !replay.pendingAlerts.isEmpty {
            let check = await witnesses.notTaken(replay.pendingAlerts, transport: transport,
                                                 probeTopic: topics.probe(clientID: configuration.mqtt.clientID), timeout: .seconds(5))
            for id in check.taken { journal.acknowledge(id) }
            for (id, message) in check.notTaken {
                publishAlert(message, id: id)
                counters.alertsResent += 1
            }
            logger.notice("alerts the last run handed over without an acknowledgement", metadata: [
                "taken": "\(check.taken.count)", "sentAgain": "\(check.notTaken.count)", "witnessesRead": "\(check.answered)",
            ])
        }
        perform(engine.event(.start))
        counters.datasetsApplied += 1
        if !replay.cleanStop {
            // The last run did not say goodbye: its last publishes may never have reached the
            // broker. Everything retained goes again, paced as after a reconnect.
            logger.notice("the last run did not stop cleanly: publishing every retained topic again", metadata: ["devices": "\(engine.devices.count)"])
            perform(engine.event(.reconnected), republished: true, engine: engine)
        }
        publishInfo(engine)
        publishStatus(engine)
        // The geometry build and the data decoding left free pages behind.
        ProcessMemory.trim()

        let producers = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await state in self.feed.updates() { continuation.yield(.feed(state)) }
                }
                group.addTask {
                    while !Task.isCancelled {
                        do { try await Task.sleep(for: self.flushInterval) } catch { return }
                        continuation.yield(.tick)
                    }
                }
                group.addTask {
                    for await _ in self.stopStream {
                        continuation.yield(.stop)
                        return
                    }
                }
            }
        }
        gate.loopStarted()
        // From here on the stop below always runs, which shuts the webhooks' client down; the
        // alerts of the start are queued already and go first.
        webhooks.start()
        await withGracefulShutdownHandler {
            var sinceYield = 0
            for await input in events {
                if case .stop = input { break }
                // A stream with a backlog hands out its elements without suspending: without a
                // yield now and then, the loop keeps its thread of the two-thread pool for
                // seconds, and the signal handler's task (SIGTERM) waits behind it.
                sinceYield += 1
                if sinceYield == 256 {
                    sinceYield = 0
                    await Task.yield()
                }
                if stopRequested.load(ordering: .relaxed), stopHandlingNow() { break }
                await waitForBrokerIfBehind(before: input)
                if let metrics, case .message = input {
                    let started = ContinuousClock.now
                    handle(input, &engine)
                    metrics.recordHandling(ContinuousClock.now - started)
                } else {
                    handle(input, &engine)
                }
            }
        } onGracefulShutdown: {
            self.requestStop()
            continuation.yield(.stop)
        }

        // Nothing more is taken from the socket (``requestStop()``); what was taken and not
        // handled within the drain limit waits in the journal. Then the snapshot (within the
        // same limit), the goodbye, and a clean leave.
        let loopEnded = ContinuousClock.now
        let unhandled = gate.waiting
        if unhandled > 0 {
            logger.notice("stopping with messages not handled; the journal keeps them for the next start", metadata: ["messages": "\(unhandled)"])
        }
        producers.cancel()
        continuation.finish()
        // The webhooks deliver what they hold while the snapshot and the goodbye run.
        let webhooks = self.webhooks
        let webhookDeadline = loopEnded + webhookDrainLimit
        let webhookDrain = Task { await webhooks.stop(before: webhookDeadline) }
        // Every `online` probe goes out before the `offline` below.
        await probes.finishAll()
        let deadline = stopDeadline.withLock { $0 } ?? .now + drainLimit
        await writeSnapshot(engine, before: max(deadline, .now + .milliseconds(500)))
        let snapshotWritten = ContinuousClock.now
        gate.readForGoodbye()
        // Say offline, but do not wait for a broker that is gone or frozen: a QoS 1 publish waits
        // for the reconnect or the PUBACK, and a stop must not hang on it. Unacknowledged, the
        // goodbye may never arrive, so the connection is then dropped without DISCONNECT and
        // the broker's Last Will says offline.
        let transport = self.transport
        let goodbye = [
            OutgoingMessage(topic: topics.bridgeInfo, payload: infoPayload(engine), qos: 1, retain: true),
            OutgoingMessage(topic: topics.bridgeState, text: BridgeState.offline, qos: 1, retain: true),
        ]
        let outcome: String? = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                do {
                    for message in goodbye { try await transport.publish(message) }
                    return nil
                } catch {
                    return "\(error)"
                }
            }
            group.addTask {
                try? await Task.sleep(for: self.goodbyeTimeout)
                return "no acknowledgement within \(self.goodbyeTimeout)"
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if let outcome {
            logger.warning(
                "could not publish offline state; leaving without DISCONNECT so that the broker publishes the Last Will",
                metadata: ["error": "\(outcome)"])
        } else {
            // The broker acknowledged the goodbye, so everything published before it too.
            journal.appendStopped()
        }
        let goodbyeEnded = ContinuousClock.now
        let undelivered = await webhookDrain.value
        if !undelivered.isEmpty {
            logger.warning("webhook alerts not delivered by the stop's limit are lost", metadata: [
                "undelivered": "\(undelivered.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))",
            ])
        }
        gate.stopReading()
        await transport.shutdown(clean: outcome == nil)
        // Messages taken while saying goodbye are in the journal (handled at the next start).
        transport.deliver { _ in }
        journal.sync()
        await producers.value
        // How long each step of the stop took, for an operator whose stop ran into systemd's limit.
        let requested = deadline - drainLimit
        func took(_ from: ContinuousClock.Instant, _ to: ContinuousClock.Instant) -> String {
            let elapsed = (to - from).components
            return "\(elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000) ms"
        }
        logger.info("stopped", metadata: [
            "devices": "\(engine.devices.count)", "accepted": "\(counters.acceptedTotal)", "dropped": "\(counters.droppedTotal)",
            "handling": "\(took(requested, loopEnded))", "snapshot": "\(took(loopEnded, snapshotWritten))",
            "goodbye": "\(took(snapshotWritten, goodbyeEnded))", "disconnect": "\(took(goodbyeEnded, .now))",
        ])
    }

    /// Whether a stop ends its handling now: at the drain limit, or once ``outgoingLimit``
    /// publishes wait for the broker. Reading is paused during the stop, so their answers stay
    /// unread and the goodbye waits for all of them: without this bound a busy drain left the
    /// goodbye thousands of answers to wait for behind the messages the broker sends meanwhile,
    /// and a loaded machine ran past its limit. What is not handled waits in the journal.
    func stopHandlingNow() -> Bool {
        if transport.unanswered >= outgoingLimit { return true }
        guard let deadline = stopDeadline.withLock({ $0 }) else { return false }
        return ContinuousClock.now >= deadline
    }

    /// Waits until the broker has acknowledged half of ``outgoingLimit`` publishes, at most
    /// ``outgoingWaitLimit``. Its answers come on the same socket as the messages, so the
    /// intake is read meanwhile even when it is full (``IntakeGate/holdOpen(_:)``).
    func waitForBrokerIfBehind(before input: Input) async {
        guard case .message = input, transport.unanswered >= outgoingLimit, !stopRequested.load(ordering: .relaxed) else { return }
        counters.outgoingWaits += 1
        infoDirty = true
        gate.holdOpen(true)
        defer { gate.holdOpen(false) }
        let transport = self.transport
        let target = outgoingLimit / 2
        _ = await FirstOutcome.finished(before: .now + outgoingWaitLimit) {
            await transport.waitForAnswers(atMost: target)
            return true
        }
    }

    /// Why the snapshot the journal continues from is lost, or `nil` when nothing is lost.
    ///
    /// Segments are numbered from 1 in a state directory and removed only once a snapshot on
    /// disk covers them, so a journal that begins after segment 1 continues from a snapshot.
    /// Without its mark in a state file, that snapshot is gone, and with it every device decided
    /// before it. A journal that begins at segment 1 holds every decision ever made (a first
    /// run that never took a snapshot): nothing is lost, and nothing is read from the broker.
    static func lostSnapshot(_ snapshot: PersistedState, replay: JournalReplay) -> String? {
        guard snapshot.journal == nil, let first = replay.segments.keys.min(), first > 1 else { return nil }
        return "state.json is missing, but the journal begins at segment \(first): the snapshot that covered the segments before it is lost"
    }

    /// Takes what the broker retains of the daemon's device states and district phases into the
    /// engine before its start, so that a device reporting again in its phase gets no alert;
    /// persists it, and writes a snapshot at once so that the next start has its state file.
    func rebuild(from retained: RetainedStates, _ engine: inout SignalEngine) async {
        logger.notice("reading the device states the broker retains", metadata: ["topic": "\(topics.base)/device/#"])
        let started = ContinuousClock.now
        let reading = await retained.read(transport: transport, idle: rebuildIdle, limit: rebuildLimit)
        let took = ContinuousClock.now - started
        let read = reading.devices.count
        let actions = engine.event(.restore(devices: reading.devices, districts: reading.districts))
        perform(actions)
        var devices = 0
        var districts = 0
        for case .persist(let change) in actions {
            if case .device = change { devices += 1 } else { districts += 1 }
        }
        let complete = reading.answered && read >= (reading.expectedDevices ?? 0)
        let rebuild = StateRebuild(devices: devices, districts: districts, known: read - devices, skipped: reading.skipped,
                                   expectedDevices: reading.expectedDevices, complete: complete)
        stateRecovery?.rebuilt = rebuild
        for example in reading.skippedExamples {
            logger.warning("a retained message is no state the daemon writes; skipped", metadata: ["topic": "\(example.topic)", "reason": "\(example.reason)"])
        }
        let metadata: Logger.Metadata = [
            "devices": "\(devices)", "known": "\(rebuild.known)", "districts": "\(districts)", "skipped": "\(reading.skipped)",
            "expectedDevices": "\(reading.expectedDevices.map(String.init) ?? "unknown")", "took": "\(took)",
        ]
        if let failure = reading.failure {
            logger.error("cannot read the retained device states; devices unknown to the journal get an alert when they next report", metadata: metadata.merging(["error": "\(failure)"]) { $1 })
        } else if !reading.answered {
            logger.error("the broker did not answer the read of the retained device states in time; rebuilt what arrived", metadata: metadata)
        } else if !complete {
            logger.error("the broker sent fewer device states than the last run held: its queue limits (max_queued_bytes, max_queued_messages) cut the flood; the others get an alert when they next report", metadata: metadata)
        } else {
            logger.notice("rebuilt the device phases from the broker's retained states", metadata: metadata)
        }
        infoDirty = true
        takeSnapshot(engine)
    }

    /// Connects, retrying while the broker is away with the MQTT client's backoff policy (0.5 s
    /// doubling to 30 s, with jitter); `false` when a shutdown came first.
    func connect() async throws -> Bool {
        let backoff = MQTTBackoff(minimum: .milliseconds(500), maximum: .seconds(30))
        var attempt = 1
        while true {
            let delay = backoff.delay(attempt: attempt, jitter: Double.random(in: 0.5...1.0))
            do {
                try await transport.connect()
                logger.info("connected", metadata: ["broker": "\(configuration.broker)", "clientID": "\(configuration.mqtt.clientID)"])
                return true
            } catch let error as FatalConnectError {
                throw error
            } catch {
                status.brokerError.withLock { $0 = "\(error)" }
                logger.warning("cannot connect to the broker; retrying", metadata: [
                    "broker": "\(configuration.broker)", "error": "\(error)", "retryIn": "\(delay)",
                ])
            }
            let slept: Void? = try? await cancelWhenGracefulShutdown { try await Task.sleep(for: delay) }
            if slept == nil || Task.isCancelled { return false }
            attempt += 1
        }
    }

    func handle(_ input: Input, _ engine: inout SignalEngine) {
        switch input {
        case .message(let message, let seq, let receivedAt):
            messagesReceived &+= 1
            defer {
                journal.appendHandled(seq)
                gate.handled(bytes: message.payload.count)
            }
            for route in intake.route(topic: message.topic, payload: message.payload, retained: message.retain) {
                switch route {
                case .input(let kind, let key, let appTopic):
                    handleLocation(kind, key: key, appTopic: appTopic, message, receivedAt: receivedAt, &engine)
                case .lampAvailability(let name, let online, let retained):
                    logger.debug("lamp availability", metadata: ["lamp": "\(name)", "online": "\(online)", "retained": "\(retained)"])
                    perform(engine.event(.lampAvailability(name: name, online: online, retained: retained)))
                case .homeAssistantOnline:
                    logger.info("Home Assistant online: sending discovery again")
                    perform(engine.event(.homeAssistantOnline))
                case .ignore:
                    break
                }
            }
        case .feed(let state):
            let previous = feedState
            feedState = state
            infoDirty = true
            if state.dataset != previous?.dataset {
                counters.datasetsApplied += 1
                dataSinceTrim = true
                logger.info("new data", metadata: ["source": "\(state.dataset.source)", "date": "\(state.dataset.date.iso)", "stale": "\(state.stale)"])
            } else if let error = state.lastError, error != previous?.lastError {
                counters.datasetsRejected += 1
                recentErrors.append(StatusView.ErrorEntry(at: Int(self.now().timeIntervalSince1970), kind: "rejected", reason: "refresh failed",
                                                          topic: state.dataset.source, detail: error))
                // A stand-in was never fetched: calling it the last good data would mislead.
                let inForce = state.kind == .standIn
                    ? "the bundled data of \(state.dataset.date.iso) stands in until the source answers"
                    : "the data of \(state.dataset.date.iso) stays in force"
                logger.warning("data check failed; \(inForce)", metadata: ["error": "\(error)", "stale": "\(state.stale)"])
            } else if state.stale != previous?.stale {
                logger.info("data staleness changed", metadata: ["stale": "\(state.stale)"])
            }
            perform(engine.event(.data(state.dataset, stale: state.stale)))
        case .tick:
            let now = ContinuousClock.now
            let wallClock = self.now().timeIntervalSince1970
            dropLog.logHeldBack(now: wallClock, to: logger, "held back further warnings of dropped location messages (counters.dropped in bridge/info counts them all)")
            publishLog.logHeldBack(now: wallClock, to: logger, "held back further warnings of failed publishes (counters.publishFailures in bridge/info counts them all)")
            let shed = gate.shed
            if shed != shedLogged {
                logger.warning("the intake was full: shed QoS 0 location messages (counters.dropped.intake-full in bridge/info)",
                               metadata: ["shed": "\(shed - shedLogged)", "total": "\(shed)"])
                shedLogged = shed
                infoDirty = true
            }
            // A snapshot once the journal has outgrown the last one: each change costs a
            // constant amount of writing, whatever the number of devices.
            if journal.wantsSnapshot(snapshotBytes: engine.devices.count * Self.snapshotBytesPerDevice) {
                takeSnapshot(engine)
            }
            ticksSinceTidy += 1
            if ticksSinceTidy >= 10 {
                ticksSinceTidy = 0
                journal.removeCovered()
            }
            // The clock is the daemon's; the decision, and which devices, the engine's.
            ticksSinceForget += 1
            if let forgetAfter = configuration.forgetAfter, ticksSinceForget >= Self.forgetEvery(forgetAfter, tick: flushInterval) {
                ticksSinceForget = 0
                let forgotten = engine.event(.forget(now: Int(self.now().timeIntervalSince1970)))
                if !forgotten.isEmpty {
                    logger.info("forgot devices not heard from within devices.forget_after", metadata: [
                        "devices": "\(forgotten.reduce(0) { if case .persist = $1 { $0 + 1 } else { $0 } })",
                    ])
                    perform(forgotten, engine: engine)
                }
            }
            if messagesReceived != intakeSeen.count { intakeSeen = (messagesReceived, now) }
            // New devices grew the tables, a burst grew the queues (intake, libmosquitto's
            // outgoing one): once fixes stop arriving, hand the free pages back. Not after every
            // lone fix: the trim walks the whole heap.
            // A state write (tens of MB of JSON for a large table) leaves its buffers free too.
            let statesWritten = saver.statesWritten
            if engine.devices.count != trimmedAt.devices || messagesReceived &- trimmedAt.messages >= Self.trimAfterMessages
                || statesWritten != trimmedAt.statesWritten || (dataSinceTrim && !engine.isReevaluating),
               now - intakeSeen.at >= trimQuiet {
                trimmedAt = (engine.devices.count, messagesReceived, statesWritten)
                // A trim in the middle of a walk (a quiet intake is enough for one) leaves the
                // walk's own garbage: the trim it is owed comes once the walk is done. Without
                // this the start's trim cleared the flag, and 100,000 devices' first walk left
                // the daemon at 70.8 MB where a trim gives 58-60 MB.
                if !engine.isReevaluating { dataSinceTrim = false }
                saver.trimHeap()
            }
            if !webhooks.senders.isEmpty, webhooks.stats != webhookStats { infoDirty = true }
            if infoDirty { publishInfo(engine) }
            publishStatus(engine)
        case .connected(let sessionPresent):
            connections += 1
            // The first CONNACK is the start's: it published everything already.
            guard connections > 1 else { return }
            counters.reconnects += 1
            infoDirty = true
            logger.notice("reconnected: publishing online and every retained topic again", metadata: [
                "sessionPresent": "\(sessionPresent)", "devices": "\(engine.devices.count)",
            ])
            let actions = engine.event(.reconnected)
            perform(actions, republished: true, engine: engine)
            // The info in the actions went out before the publishes after it were counted.
            infoDirty = true
        case .recover(let generation):
            infoDirty = true
            let walking = engine.isRecovering
            perform(engine.event(.recoverDevices(generation: generation)), republished: true)
            if walking, !engine.isRecovering { logger.info("every device state republished", metadata: ["devices": "\(engine.devices.count)"]) }
        case .reevaluate(let generation):
            let walking = engine.isReevaluating
            perform(engine.event(.reevaluateDevices(generation: generation)))
            if walking, !engine.isReevaluating { logger.info("every device re-evaluated", metadata: ["devices": "\(engine.devices.count)"]) }
        case .stop:
            break
        }
    }

    func handleLocation(_ kind: InputKind, key: String, appTopic: Bool, _ message: MQTTMessage, receivedAt: Int, _ engine: inout SignalEngine) {
        switch parser.parse(kind, topicKey: key, payload: message.payload) {
        case .fix(var fix):
            fix.owntracks = appTopic
            let place: Place
            if let metrics {
                let started = ContinuousClock.now
                place = locator.place(latitude: fix.latitude, longitude: fix.longitude)
                metrics.recordLookup(ContinuousClock.now - started)
            } else {
                place = locator.place(latitude: fix.latitude, longitude: fix.longitude)
            }
            if fix.langIgnored { counters.invalidLang += 1 }
            let actions = engine.event(.fix(fix, place: place, receivedAt: receivedAt))
            if !actions.contains(where: { if case .dropped = $0 { true } else { false } }) {
                counters.accepted[kind.rawValue, default: 0] += 1
            }
            infoDirty = true
            logger.trace("fix", metadata: ["device": "\(fix.device)", "lat": "\(fix.latitude)", "lon": "\(fix.longitude)"])
            perform(actions, topic: message.topic)
        case .skipped(let type):
            counters.skipped[type, default: 0] += 1
            infoDirty = true
        case .dropped(let reason, let detail):
            drop(reason, detail: detail, topic: message.topic)
        }
    }

    func drop(_ reason: DropReason, detail: String, topic: String) {
        counters.dropped[reason.rawValue, default: 0] += 1
        infoDirty = true
        let time = now().timeIntervalSince1970
        recentErrors.append(StatusView.ErrorEntry(at: Int(time), kind: "dropped", reason: reason.rawValue, topic: topic, detail: detail))
        let admitted = dropLog.admit(now: time)
        if admitted.log {
            var metadata: Logger.Metadata = ["reason": "\(reason)", "topic": "\(topic)", "detail": "\(detail)"]
            if admitted.suppressed > 0 { metadata["suppressed"] = "\(admitted.suppressed)" }
            logger.warning("dropped a location message", metadata: metadata)
        }
    }

    /// - Parameters:
    ///   - republished: the publishes repeat what was published before (a recovery), counted
    ///     under `republished` as well.
    ///   - engine: the engine after the event, for a `bridge/info` it asks for.
    func perform(_ actions: [SignalEngine.Action], topic: String = "", republished: Bool = false, engine: SignalEngine? = nil) {
        // Each decision is journaled where the engine put it, before what announces it, and
        // together with its alert (one journal write): a crash part-way through a batch (a new
        // publication changes many districts and devices at once) leaves each decision with its
        // alert or neither, and the next start makes the missing decisions again. Journaling the
        // batch's decisions all first lost the alerts not yet journaled: the restart took them
        // as announced.
        // An alert and its OwnTracks transition announce one decision: journaled with it in
        // the same write, so a crash keeps all three or none.
        var alertIDs: [Int: UInt64] = [:]
        // The journal id of the alert a `.notify` follows, of which the webhook's idempotency key is made.
        var lastAlertID: UInt64 = 0
        for (index, action) in actions.enumerated() {
            switch action {
            case .persist(let change):
                switch change {
                case .device: deviceChanges &+= 1
                case .forgotten:
                    deviceChanges &+= 1
                    counters.forgotten += 1
                    infoDirty = true
                case .district: break
                }
                let announcing = Self.announcements(of: index, in: actions)
                guard let last = announcing.last, case .publish(_, let kind) = actions[last] else {
                    journal.append(change)
                    continue
                }
                let messages = announcing.compactMap { if case .publish(let message, _) = actions[$0] { message } else { nil } }
                let ids = journal.append(change, announcedBy: messages, witness: Self.witness(of: kind, after: actions[(last + 1)...]))
                for (position, id) in zip(announcing, ids) { alertIDs[position] = id }
                alertsJournaled += 1
                crashIfDue()
            case .publish(let message, let kind) where kind.isAnnouncement:
                // Journaled with its decision above: the engine decides before it announces.
                let id: UInt64
                if let journaled = alertIDs[index] {
                    id = journaled
                } else {
                    id = journal.appendAlert(message, witness: Self.witness(of: kind, after: actions[(index + 1)...]))
                    alertsJournaled += 1
                    crashIfDue()
                }
                publishAlert(message, id: id)
                publishedByKind[kind, default: 0] += 1
                // The webhook's idempotency key is made of the alert's id, not its transition's.
                if kind.isAlert { lastAlertID = id }
                counters.published += 1
                if kind.isAlert { counters.alerts += 1 } else { counters.owntracksTransitions += 1 }
            case .notify(let webhook, let payload):
                webhooks.send(webhook: webhook, alertID: lastAlertID, payload: payload, now: now().timeIntervalSince1970)
            case .publish(let message, let kind):
                do {
                    // In order, without a round trip per message: libmosquitto delivers QoS 1.
                    try transport.enqueue(message)
                    counters.published += 1
                    publishedByKind[kind, default: 0] += 1
                    if republished { counters.republished += 1 }
                } catch {
                    publishFailed(message, error)
                }
            case .dropped(let reason):
                drop(reason, detail: reason == .inaccurate ? "acc above inputs.max_accuracy, in another district" : "older than the fix held for the device",
                     topic: topic)
            case .alertSuppressed(let reason):
                counters.alertsSuppressed[reason.rawValue, default: 0] += 1
                infoDirty = true
            case .problem(let message):
                logger.warning("no signal", metadata: ["problem": "\(message)"])
            case .publishInfo:
                if let engine { publishInfo(engine) } else { infoDirty = true }
            case .continueRecovery(let generation):
                pace(then: .recover(generation: generation))
            case .continueReevaluation(let generation):
                pace(then: .reevaluate(generation: generation))
            case .recordDiscovery(let scopes, let whenTaken):
                recordDiscovery(scopes, whenTaken: whenTaken)
            case .recordShape(let shape):
                recordShape(shape)
            }
        }
    }

    /// Queues `next` (the next batch of a recovery or re-evaluation) once the broker has
    /// acknowledged a publish made after this batch: it has then taken the whole batch (one
    /// connection, in order), libmosquitto holds at most one batch for it, and the messages
    /// that arrived meanwhile are queued before `next` (``BrokerProbes``).
    func pace(then next: Input) {
        let inbox = self.inbox
        probes.start { _ in inbox?.yield(next) }
    }

    /// Writes what may be announced to Home Assistant: at once, or (`whenTaken`) once the
    /// broker has acknowledged a publish made now, and so taken the removals before it (one
    /// connection, in order): a crash before then leaves the old record, and the next start
    /// removes again.
    func recordDiscovery(_ scopes: [DiscoveryScope], whenTaken: Bool) {
        let file = discoveryScopes
        let logger = self.logger
        let described = scopes.map { "\($0.prefix)/\($0.node)\($0.devices ? " with devices" : "")" }.joined(separator: ", ")
        @Sendable func write() {
            do {
                try file.save(scopes)
                logger.info(whenTaken ? "the broker took the removed Home Assistant configs; recorded what is announced" : "recorded what may be announced to Home Assistant",
                            metadata: ["scopes": "\(described)"])
            } catch {
                logger.warning("cannot record what is announced to Home Assistant; the next start may remove or keep too much", metadata: ["error": "\(error)"])
            }
        }
        guard whenTaken else { return write() }
        onceBrokerTook(write, otherwise: "the removals of Home Assistant configs were not acknowledged; the next start sends them again")
    }

    /// Runs `body` once the broker has acknowledged a publish made now, and so taken every
    /// publish handed over before it (one connection, in order); logs `otherwise` if it does not.
    func onceBrokerTook(_ body: @escaping @Sendable () -> Void, otherwise: String) {
        let logger = self.logger
        probes.start { error in
            guard let error else { return body() }
            logger.notice(Logger.Message(stringLiteral: otherwise), metadata: ["error": "\(error)"])
        }
    }

    /// Writes the shape of the retained states once the broker has acknowledged a publish made
    /// now, and so taken the states and emptied texts topics before it: a crash before then
    /// leaves the old record, and the next start republishes again.
    func recordShape(_ shape: PublishedShape) {
        let file = publishedShapes
        let logger = self.logger
        onceBrokerTook({
            do {
                try file.save(shape)
                logger.info("recorded the shape of the published device states")
            } catch {
                logger.warning("cannot record the shape of the published device states; the next start republishes them", metadata: ["error": "\(error)"])
            }
        }, otherwise: "the republished device states were not acknowledged; the next start sends them again")
    }

    /// The announcements of the decision at `index` (its alert, and the OwnTracks transition
    /// after it): those before the next decision.
    static func announcements(of index: Int, in actions: [SignalEngine.Action]) -> [Int] {
        var found: [Int] = []
        for next in (index + 1)..<actions.count {
            switch actions[next] {
            case .persist: return found
            case .publish(_, let kind) where kind.isAnnouncement: found.append(next)
            default: continue
            }
        }
        return found
    }

    /// The retained publish after an alert that proves the broker took it (``AlertWitnesses``).
    /// The engine puts it right after the alert's own device or district (``SignalEngine``);
    /// found by its kind, so the daemon never parses a topic to decide.
    static func witness(of kind: SignalEngine.PublishKind, after rest: ArraySlice<SignalEngine.Action>) -> Witness? {
        let witnessKind: SignalEngine.PublishKind = kind == .districtAlert ? .districtPhase : .deviceState
        for case .publish(let message, let next) in rest where next == witnessKind {
            return Witness(topic: message.topic, payload: message.payload)
        }
        return nil
    }

    /// The crash tests' kill (``crashAfterAlerts``). What was handed over before is acknowledged
    /// first (waiting on this thread: a test hook), so the kill hits this alert alone and not
    /// the moment between an earlier alert and its witness, the gap decision 20 leaves open.
    func crashIfDue() {
        guard alertsJournaled == crashAfterAlerts else { return }
        let until = ContinuousClock.now + .seconds(5)
        while transport.unanswered > 0, ContinuousClock.now < until { usleep(1000) }
        kill(getpid(), SIGKILL)
    }

    /// How many ticks apart the devices are checked against `forgetAfter`: a scan reads every
    /// device's time, so once a minute at most, and at least 60 times per `forgetAfter`.
    static func forgetEvery(_ forgetAfter: Duration, tick: Duration) -> Int {
        let ticksPerMinute = max(1, Int(Duration.seconds(60) / tick))
        return max(1, min(ticksPerMinute, Int(forgetAfter / tick) / 60))
    }

    /// A rough size of a device in the snapshot, to compare the journal with.
    static let snapshotBytesPerDevice = 160

    /// Hands an alert over; its id leaves the journal's pending list when the broker took it.
    /// One that is not acknowledged (the client closed first) stays pending: the next start sends it.
    func publishAlert(_ message: OutgoingMessage, id: UInt64) {
        let journal = self.journal!
        do {
            try transport.enqueue(message) { error in
                // A broker that refuses it (not authorised) will refuse it again: done either way.
                if error == nil || (error as? MQTTError)?.code == .rejected { journal.acknowledge(id) }
            }
        } catch {
            publishFailed(message, error)
        }
    }

    /// Counts a publish that libmosquitto refused, and logs it within the rate limit.
    func publishFailed(_ message: OutgoingMessage, _ error: any Error) {
        counters.publishFailures += 1
        let admitted = publishLog.admit(now: now().timeIntervalSince1970)
        if admitted.log {
            logger.warning("publish failed", metadata: ["topic": "\(message.topic)", "error": "\(error)", "suppressed": "\(admitted.suppressed)"])
        }
    }

    /// Starts a snapshot on the writer thread: the loop only copies the state (copy-on-write),
    /// so a large one never holds up the next location. The journal opens a new segment first;
    /// the old ones go once the snapshot is on disk and their messages are handled.
    func takeSnapshot(_ engine: SignalEngine) {
        let journal = self.journal!
        let mark = journal.beginSnapshot()
        saver.save(PersistedState(devices: engine.devices, districts: engine.districtPhases, journal: mark)) {
            journal.snapshotWritten(mark)
        }
    }

    /// The stop's snapshot, waited for until `deadline` at most (the journal has it all anyway).
    func writeSnapshot(_ engine: SignalEngine, before deadline: ContinuousClock.Instant) async {
        let journal = self.journal!
        let mark = journal.beginSnapshot()
        let state = PersistedState(devices: engine.devices, districts: engine.districtPhases, journal: mark)
        let saver = self.saver
        let written = await FirstOutcome.finished(before: deadline, priority: .high) { saver.writeNow(state) }
        if written {
            journal.snapshotWritten(mark)
        } else {
            logger.notice("the snapshot did not finish within the stop's limit; the journal holds the state", metadata: ["devices": "\(engine.devices.count)"])
        }
        journal.sync()
    }

    /// The counters with the ones other parts keep (the intake gate, the webhooks).
    func liveCounters() -> Counters {
        var counters = self.counters
        counters.intakePaused = gate.pauses
        if gate.shed > 0 { counters.dropped["intake-full", default: 0] = gate.shed }
        counters.data = feedState?.status?.counters ?? DataCounters()
        counters.webhooks = webhooks.stats
        return counters
    }

    func infoPayload(_ engine: SignalEngine) -> [UInt8] {
        guard let feedState else { return [] }
        var counters = liveCounters()
        counters.failovers = transport.failovers
        let info = BridgeInfo(broker: transport.brokerInUse,
            version: Self.version, ruleSet: ruleSet.id, source: feedState.dataset.source, dataDate: feedState.dataset.date.iso,
            dataKind: feedState.kind.rawValue, lastFetch: feedState.lastFetch.map { InternetTime.format(secondsSince1970: $0.timeIntervalSince1970) }, lastError: feedState.lastError,
            lastCheck: feedState.status?.lastCheck.map { InternetTime.format(secondsSince1970: $0.timeIntervalSince1970) },
            held: feedState.status?.held,
            stale: feedState.stale, devices: engine.devices.count, counters: counters, stateRecovered: stateRecovery)
        return info.json()
    }

    /// Hands the status over to the HTTP readers (``StatusView``): values only, so this copies
    /// nothing; the device table only when a reader asked for it and it changed.
    /// The hand-over before the start: the data in force and readiness, no rule set yet.
    func publishReadiness() {
        guard configuration.http.listen != nil else { return }
        status.publish(readinessSnapshot())
    }

    /// A snapshot with what `/readyz` reads: readiness, the data in force, the time.
    func readinessSnapshot() -> StatusView.Snapshot {
        var snapshot = StatusView.Snapshot()
        snapshot.readiness = StatusView.Readiness(dataLoaded: feedState != nil, connected: false, subscribed: subscribed)
        snapshot.feed = feedState
        snapshot.at = Int(now().timeIntervalSince1970)
        return snapshot
    }

    func publishStatus(_ engine: SignalEngine) {
        // Without the HTTP server (`http.listen: false`) nobody reads it.
        guard configuration.http.listen != nil else { return }
        statusGeneration += 1
        var snapshot = readinessSnapshot()
        snapshot.generation = statusGeneration
        snapshot.ruleSet = ruleSet
        snapshot.dataset = engine.dataset
        snapshot.stale = engine.stale
        snapshot.districts = engine.districtSignals.map { StatusView.District(ags: $0.key, signal: $0.value) }.sorted { $0.ags < $1.ags }
        let wanted = status.takeDevicesWanted()
        if devicesHanded.changes == deviceChanges {
            devicesHanded.generation = statusGeneration
        } else if wanted || devicesHanded.changes < 0 {
            devicesHanded = (statusGeneration, deviceChanges)
        }
        snapshot.devicesGeneration = devicesHanded.generation
        snapshot.devices = devicesHanded.generation == statusGeneration ? engine.devices : status.snapshot().devices
        snapshot.deviceCount = engine.devices.count
        let looks = engine.lampLooksSent
        let online = engine.lampAvailability
        snapshot.lamps = configuration.lamps.map {
            StatusView.Lamp(settings: $0, online: online[$0.name], color: looks[$0.name]?.color.hex, blink: looks[$0.name]?.blink ?? false)
        }
        snapshot.bridgeInfo = infoPayload(engine)
        snapshot.counters = liveCounters()
        snapshot.messagesReceived = messagesReceived
        snapshot.publishedByKind = Dictionary(uniqueKeysWithValues: publishedByKind.map { ("\($0.key)", $0.value) })
        snapshot.errors = recentErrors
        status.publish(snapshot)
    }

    /// `bridge/info`, handed over without waiting for the broker (like every publish of the loop).
    func publishInfo(_ engine: SignalEngine) {
        guard feedState != nil else { return }
        infoDirty = false
        webhookStats = webhooks.stats
        do {
            try transport.enqueue(OutgoingMessage(topic: topics.bridgeInfo, payload: infoPayload(engine), qos: 1, retain: true))
        } catch {
            logger.debug("bridge info not published", metadata: ["error": "\(error)"])
        }
    }
}

/// Resumes a continuation with the first of several outcomes (the others are dropped).
final class FirstOutcome: Sendable {
    private let continuation = Mutex<CheckedContinuation<Bool, Never>?>(nil)

    func set(_ continuation: CheckedContinuation<Bool, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func resume(_ value: Bool) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }

    /// Runs `work` on a task of its own; `true` if it returned `true` before `deadline`, else
    /// `false` at the deadline. Not a task group, which would wait for `work` even after it.
    static func finished(before deadline: ContinuousClock.Instant, priority: TaskPriority? = nil,
                         _ work: @escaping @Sendable () async -> Bool) async -> Bool {
        let outcome = FirstOutcome()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            outcome.set(continuation)
            Task.detached(priority: priority) {
                if await work() { outcome.resume(true) }
            }
            Task.detached {
                try? await Task.sleep(until: deadline)
                outcome.resume(false)
            }
        }
    }
}
