import AmpelCore
import AmpelData
import AmpelDomain
import AmpelMQTT
import AmpelMessages
import Foundation
import Logging
import Synchronization
import ServiceLifecycle

/// The start: the state and the journal read back, the engine made, the broker connected and
/// subscribed, `online`, what a lost state file needs from the broker, the alerts a crash left
/// unacknowledged, and the engine's first publishing.
extension AmpelDaemon {
    /// What the start hands to the loop.
    struct Started {
        var run: Running
        /// Everything the engine reacts to, in order (fed through `run.inputs`).
        var events: AsyncStream<Input>
    }

    /// `nil` when a stop came before the broker answered.
    func start() async throws -> Started? {
        try store.prepare()
        let snapshot = try self.restored ?? store.load()
        let replay = JournalReplay.read(directory: store.directory, over: snapshot)
        noteLosses(snapshot, replay: replay)
        let statusView = self.status
        let journal = try Journal(directory: store.directory, continuing: replay, logger: logger) { problem in
            statusView.journalProblem.withLock { $0 = problem }
        }
        let executor = ActionExecutor(journal: journal, transport: transport, webhooks: webhooks,
                                      announcementQoS: configuration.mqtt.announcementQoS, logger: logger, now: now)
        #if AMPEL_FAULT_INJECTION
        executor.afterJournaling = FaultInjection.crashAfterAlerts(transport: transport)
        #endif
        let initial = try await feed.initial()
        feedState = initial
        // One queue for everything the engine reacts to, in order. The transport hands each
        // message straight to it from the MQTT network thread (set before connecting, so that
        // nothing the session kept for the daemon passes by).
        let (events, continuation) = AsyncStream<Input>.makeStream()
        var run = Running(engine: makeEngine(restored: replay.state, data: initial), journal: journal, executor: executor,
                          inputs: continuation)
        logStart(replay, data: initial)
        // What the last run took from the broker but did not handle comes first, in order.
        for input in replay.pendingInputs {
            gate.taken(bytes: input.message.payload.count)
            continuation.yield(.message(input.message, seq: input.seq, receivedAt: input.receivedAt))
        }
        let witnesses = AlertWitnesses()
        let retained = RetainedStates(topics: topics, clientID: configuration.mqtt.clientID)
        listen(journal: journal, inputs: continuation, witnesses: witnesses, retained: retained)

        // The data is loaded: `/readyz` and the page say so, and why the broker is not
        // there yet, instead of "data not loaded" while the connect is retried. Readiness
        // only: the districts' signals come with the start, and the page waits for them.
        publishReadiness()
        guard try await connect() else {
            logger.info("stopped before the broker answered")
            continuation.finish()
            return nil
        }
        // Subscribe first: what arrives during the start-up publishing waits in the queue.
        let filters = try await subscribeInputs()
        logger.info("subscribed", metadata: ["filters": "\(filters.joined(separator: " "))"])
        subscribed = true
        if stateRecovery == nil {
            // A read cut short by a crash leaves its QoS 0 subscriptions in the persistent
            // session, and every state the daemon publishes would come back to it as an input.
            // Before `online`: whoever sees `online` may stop or freeze the broker, and this
            // round trip must not be left waiting then.
            try? await transport.unsubscribe(retained.filters)
        }
        try await transport.publish(OutgoingMessage(topic: topics.bridgeState, text: BridgeState.online, qos: .atLeastOnce, retain: true))
        if stateRecovery != nil {
            await rebuild(from: retained, &run)
        }
        await resendUntaken(replay.pendingAlerts, witnesses: witnesses, run)
        perform(run.engine.event(.start), in: run)
        report.counters.datasetsApplied += 1
        if !replay.cleanStop {
            // The last run did not say goodbye: its last publishes may never have reached the
            // broker. Everything retained goes again, paced as after a reconnect.
            logger.notice("the last run did not stop cleanly: publishing every retained topic again", metadata: ["devices": "\(run.engine.devices.count)"])
            perform(run.engine.event(.reconnected), in: run, republished: true)
        }
        publishInfo(run)
        publishStatus(run)
        // The geometry build and the data decoding left free pages behind.
        ProcessMemory.trim()
        return Started(run: run, events: events)
    }

    /// Says what the journal's replay found lost: torn records, and a state file the journal
    /// continues from that is gone (then the start rebuilds from the broker).
    func noteLosses(_ snapshot: PersistedState, replay: JournalReplay) {
        for damage in replay.damaged {
            logger.warning("journal segment ends in a torn record (the last write of a process that died); read up to it", metadata: ["segment": "\(damage)"])
        }
        if stateRecovery == nil, let lost = Self.lostSnapshot(snapshot, replay: replay) {
            stateRecovery = StateRecovery(movedTo: nil, reason: lost, at: InternetTime.format(secondsSince1970: now().timeIntervalSince1970))
            logger.error("the state file is missing but the journal continues from it; rebuilding device phases from the broker's retained states", metadata: [
                "reason": "\(lost)", "stateDir": "\(store.directory)",
            ])
        }
    }

    /// The engine over the restored state, with what earlier runs announced to Home Assistant
    /// and the shape of the states they retained.
    func makeEngine(restored: PersistedState, data: FeedState) -> SignalEngine {
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
        return SignalEngine(settings: Self.settings(configuration, ruleSet: ruleSet, announcedDiscovery: announced.scopes,
                                                    publishedShape: published.shape), dataset: data.dataset,
                            stale: data.stale, restored: restored)
    }

    func logStart(_ replay: JournalReplay, data: FeedState) {
        logger.info("starting", metadata: [
            "data": "\(data.dataset.source) \(data.dataset.date.iso)", "stale": "\(data.stale)",
            "devices": "\(replay.state.devices.count)", "ruleSet": "\(ruleSet.id)", "stateDir": "\(store.directory)",
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
    }

    /// What the transport hands over from its network thread: messages (into the journal before
    /// anything else: libmosquitto has acknowledged them already), refusals, connections.
    func listen(journal: Journal, inputs: AsyncStream<Input>.Continuation, witnesses: AlertWitnesses, retained: RetainedStates) {
        let now = self.now
        let gate = self.gate
        transport.deliver { message in
            if witnesses.take(message) || retained.take(message) { return }
            // Past the intake's bound a QoS 0 fix is shed here, counted, never journaled.
            if gate.sheds(qos0: message.qos == .atMostOnce) { return }
            let receivedAt = Int(now().timeIntervalSince1970)
            let seq = journal.appendInput(message, receivedAt: receivedAt)
            gate.taken(bytes: message.payload.count)
            inputs.yield(.message(message, seq: seq, receivedAt: receivedAt))
        }
        let status = self.status
        let topics = self.topics
        let discoveryPrefix = configuration.homeAssistant.discovery ? configuration.homeAssistant.prefix : nil
        transport.onPublishRefused { topic, reason in
            status.refusals.record(topic: topic, class: topics.refusalClass(of: topic, discoveryPrefix: discoveryPrefix),
                                   reason: reason, at: now().timeIntervalSince1970)
        }
        transport.connections { sessionPresent in
            status.connected.store(true, ordering: .relaxed)
            status.brokerError.withLock { $0 = nil }
            inputs.yield(.connected(sessionPresent: sessionPresent))
        } lost: { failure in
            status.connected.store(false, ordering: .relaxed)
            // Why the reconnect fails (a changed password on the broker): /readyz says it.
            if let failure { status.brokerError.withLock { $0 = failure } }
        }
    }

    /// Alerts decided before a crash that the broker never acknowledged: those it did not take
    /// after all (no witness retained) go again.
    func resendUntaken(_ pending: [(id: UInt64, message: OutgoingMessage, witness: Witness?)], witnesses: AlertWitnesses, _ run: Running) async {
        guard !pending.isEmpty else { return }
        let check = await witnesses.notTaken(pending, transport: transport,
                                             probeTopic: topics.probe(clientID: configuration.mqtt.clientID), timeout: .seconds(5))
        for id in check.taken { run.journal.acknowledge(id) }
        for (id, message) in check.notTaken {
            run.executor.announce(message, id: id)
            report.counters.alertsResent += 1
        }
        logger.notice("alerts the last run handed over without an acknowledgement", metadata: [
            "taken": "\(check.taken.count)", "sentAgain": "\(check.notTaken.count)", "witnessesRead": "\(check.answered)",
        ])
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
    func rebuild(from retained: RetainedStates, _ run: inout Running) async {
        logger.notice("reading the device states the broker retains", metadata: ["topic": "\(topics.base)/device/#"])
        let started = ContinuousClock.now
        let reading = await retained.read(transport: transport, idle: limits.rebuildIdle, limit: limits.rebuildLimit)
        let took = ContinuousClock.now - started
        let read = reading.devices.count
        let actions = run.engine.event(.restore(devices: reading.devices, districts: reading.districts))
        perform(actions, in: run)
        var devices = 0
        var districts = 0
        for case .decide(let decision) in actions {
            if case .device = decision.change { devices += 1 } else { districts += 1 }
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
        report.infoDirty = true
        takeSnapshot(run)
    }

    /// Connects, retrying while the broker is away with the MQTT client's backoff policy (0.5 s
    /// doubling to 30 s, with jitter); `false` when a shutdown came first.
    func connect() async throws -> Bool {
        let backoff = Backoff(minimum: .milliseconds(500), maximum: .seconds(30))
        var attempt = 1
        while true {
            let delay = backoff.delay(attempt: attempt, random: Double.random(in: 0..<1))
            do {
                try await transport.connectToBroker()
                logger.info("connected", metadata: ["broker": "\(configuration.broker)", "clientID": "\(configuration.mqtt.clientID)"])
                return true
            } catch let error as FatalConnectError {
                throw error
            } catch let error as ConfigurationError {
                // The setting the broker's refusal points at (a password, the client id): exit 78.
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

    /// Subscribes to the input filters in one request; a filter the broker refuses (its ACL
    /// denies reading it) is named and the others still serve: the refused ones are logged,
    /// and `/readyz` says `degraded`, or not ready when none was granted. Returns the granted.
    func subscribeInputs() async throws -> [String] {
        var granted: [String] = []
        var refused: [(filter: String, reason: String)] = []
        let filters = intake.subscriptions
        for (filter, answer) in zip(filters, try await transport.subscribeAnswers(filters)) {
            switch answer {
            case .granted:
                granted.append(filter)
            case .refused(let code):
                let reason = MQTTError.describeReason(code)
                refused.append((filter, reason))
                logger.error("the broker refused the input filter: no location on it reaches the daemon; check the broker's ACL (the daemon's user needs read access to it)",
                             metadata: ["filter": "\(filter)", "reason": "\(reason)"])
            }
        }
        let inputs = Set(filters).subtracting([intake.homeAssistantStatus].compactMap { $0 })
        let noneGranted = !refused.isEmpty && granted.allSatisfy { !inputs.contains($0) }
        status.refusals.subscribed(refused: refused, noneGranted: noneGranted)
        return granted
    }
}
