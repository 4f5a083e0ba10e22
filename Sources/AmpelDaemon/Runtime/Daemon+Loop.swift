import AmpelCore
import AmpelData
import AmpelDomain
import AmpelMQTT
import Foundation
import Logging
import Synchronization
import ServiceLifecycle

/// The loop: one queue of inputs (broker messages, data, ticks, a stop), handled in order by
/// the one task that owns the engine.
extension AmpelDaemon {
    /// The inputs that do not come from the broker: new data, the tick, the stop.
    func startProducers(_ inputs: AsyncStream<Input>.Continuation) -> Task<Void, Never> {
        Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await state in self.feed.updates() { inputs.yield(.feed(state)) }
                }
                group.addTask {
                    while !Task.isCancelled {
                        do { try await Task.sleep(for: self.limits.tick) } catch { return }
                        inputs.yield(.tick)
                    }
                }
                group.addTask {
                    for await _ in self.stopping.signals {
                        inputs.yield(.stop)
                        return
                    }
                }
            }
        }
    }

    /// Handles `events` until a stop.
    func loop(_ events: AsyncStream<Input>, _ run: inout Running) async {
        // The shutdown handler cannot capture `run`.
        let inputs = run.inputs
        await withGracefulShutdownHandler {
            var sinceYield = 0
            for await input in events {
                if case .stop = input { break }
                // A stream with a backlog hands out its elements without suspending: without a
                // yield now and then the loop keeps its thread. On the network thread (where a
                // message resumes it) no answer is read and no publish written meanwhile; on the
                // pool (where a tick, data or a walk's batch resumes it, and it stays until the
                // stream is empty) the signal handler's task (SIGTERM) may wait behind it on a
                // small machine.
                sinceYield += 1
                if sinceYield == 256 {
                    sinceYield = 0
                    await Task.yield()
                }
                if stopping.isRequested, stopHandlingNow() { break }
                await waitForBrokerIfBehind(before: input)
                if let metrics, case .message = input {
                    let started = ContinuousClock.now
                    handle(input, &run)
                    metrics.recordHandling(ContinuousClock.now - started)
                } else {
                    handle(input, &run)
                }
            }
        } onGracefulShutdown: {
            self.requestStop()
            inputs.yield(.stop)
        }
    }

    func handle(_ input: Input, _ run: inout Running) {
        switch input {
        case .message(let message, let seq, let receivedAt):
            report.messagesReceived &+= 1
            defer {
                run.journal.appendHandled(seq)
                gate.handled(bytes: message.payload.count)
            }
            for route in intake.route(topic: message.topic, payload: message.payload, retained: message.retain) {
                switch route {
                case .input(let kind, let key, let appTopic):
                    handleLocation(kind, key: key, appTopic: appTopic, message, receivedAt: receivedAt, &run)
                case .lampAvailability(let name, let online, let retained):
                    logger.debug("lamp availability", metadata: ["lamp": "\(name)", "online": "\(online)", "retained": "\(retained)"])
                    perform(run.engine.event(.lampAvailability(name: name, online: online, retained: retained)), in: run)
                case .homeAssistantOnline:
                    logger.info("Home Assistant online: sending discovery again")
                    perform(run.engine.event(.homeAssistantOnline), in: run)
                case .ignore:
                    break
                }
            }
        case .feed(let state):
            let previous = feedState
            feedState = state
            report.infoDirty = true
            if state.dataset != previous?.dataset {
                report.counters.datasetsApplied += 1
                housekeeping.dataTaken()
                logger.info("new data", metadata: ["source": "\(state.dataset.source)", "date": "\(state.dataset.date.iso)", "stale": "\(state.stale)"])
            } else if let error = state.lastError, error != previous?.lastError {
                report.counters.datasetsRejected += 1
                report.recentErrors.append(StatusView.ErrorEntry(at: Int(self.now().timeIntervalSince1970), kind: "rejected", reason: "refresh failed",
                                                          topic: state.dataset.source, detail: error))
                // A stand-in was never fetched: calling it the last good data would mislead.
                let inForce = state.kind == .standIn
                    ? "the bundled data of \(state.dataset.date.iso) stands in until the source answers"
                    : "the data of \(state.dataset.date.iso) stays in force"
                logger.warning("data check failed; \(inForce)", metadata: ["error": "\(error)", "stale": "\(state.stale)"])
            } else if state.stale != previous?.stale {
                logger.info("data staleness changed", metadata: ["stale": "\(state.stale)"])
            }
            perform(run.engine.event(.data(state.dataset, stale: state.stale)), in: run)
        case .tick:
            tick(&run)
        case .connected(let sessionPresent):
            connections += 1
            // The first CONNACK is the start's: it published everything already.
            guard connections > 1 else { return }
            report.counters.reconnects += 1
            logger.notice("reconnected: publishing online and every retained topic again", metadata: [
                "sessionPresent": "\(sessionPresent)", "devices": "\(run.engine.devices.count)",
            ])
            perform(run.engine.event(.reconnected), in: run, republished: true, infoNow: true)
            // The info in the actions went out before the publishes after it were counted.
            report.infoDirty = true
        case .recover(let generation):
            report.infoDirty = true
            let walking = run.engine.isRecovering
            perform(run.engine.event(.recoverDevices(generation: generation)), in: run, republished: true)
            if walking, !run.engine.isRecovering { logger.info("every device state republished", metadata: ["devices": "\(run.engine.devices.count)"]) }
        case .reevaluate(let generation):
            let walking = run.engine.isReevaluating
            perform(run.engine.event(.reevaluateDevices(generation: generation)), in: run)
            if walking, !run.engine.isReevaluating { logger.info("every device re-evaluated", metadata: ["devices": "\(run.engine.devices.count)"]) }
        case .stop:
            break
        }
    }

    func handleLocation(_ kind: InputKind, key: String, appTopic: Bool, _ message: MQTTMessage, receivedAt: Int, _ run: inout Running) {
        switch parser.parse(kind, topicKey: key, payload: message.payload) {
        case .fix(var fix):
            fix.owntracks = appTopic
            let place: Signal.DistrictRef?
            if let metrics {
                let started = ContinuousClock.now
                place = locator.place(latitude: fix.latitude, longitude: fix.longitude)
                metrics.recordLookup(ContinuousClock.now - started)
            } else {
                place = locator.place(latitude: fix.latitude, longitude: fix.longitude)
            }
            if fix.langIgnored { report.counters.invalidLang += 1 }
            let actions = run.engine.event(.fix(fix, place: place, receivedAt: receivedAt))
            if !actions.contains(where: { if case .dropped = $0 { true } else { false } }) {
                report.counters.accepted[kind.rawValue, default: 0] += 1
            }
            report.infoDirty = true
            logger.trace("fix", metadata: ["device": "\(fix.device)", "lat": "\(fix.latitude)", "lon": "\(fix.longitude)"])
            perform(actions, in: run, topic: message.topic)
        case .skipped(let type):
            report.counters.skipped[type, default: 0] += 1
            report.infoDirty = true
        case .dropped(let reason, let detail):
            drop(reason, detail: detail, topic: message.topic)
        }
    }

    func drop(_ reason: DropReason, detail: String, topic: String) {
        let admitted = report.dropped(reason, detail: detail, topic: topic, at: now().timeIntervalSince1970)
        if admitted.log {
            var metadata: Logger.Metadata = ["reason": "\(reason)", "topic": "\(topic)", "detail": "\(detail)"]
            if admitted.suppressed > 0 { metadata["suppressed"] = "\(admitted.suppressed)" }
            logger.warning("dropped a location message", metadata: metadata)
        }
    }

    /// Carries out the engine's actions (``ActionExecutor``); counts and queues what is the daemon's own.
    /// - Parameters:
    ///   - republished: the publishes repeat what was published before (a recovery), counted
    ///     under `republished` as well.
    ///   - infoNow: a `bridge/info` the actions ask for goes out in its place, from `run`'s
    ///     engine (after the event); otherwise with the next tick.
    func perform(_ actions: [SignalEngine.Action], in run: Running, topic: String = "", republished: Bool = false, infoNow: Bool = false) {
        run.executor.execute(actions, republished: republished) { action in
            switch action {
            case .dropped(let reason):
                drop(reason, detail: reason == .inaccurate ? "acc above inputs.max_accuracy, in another district" : "older than the fix held for the device",
                     topic: topic)
            case .alertSuppressed(let reason):
                report.counters.alertsSuppressed[reason.rawValue, default: 0] += 1
                report.infoDirty = true
            case .problem(let message):
                logger.warning("no signal", metadata: ["problem": "\(message)"])
            case .publishInfo:
                if infoNow { publishInfo(run) } else { report.infoDirty = true }
            case .continueRecovery(let generation):
                pace(then: .recover(generation: generation), into: run.inputs)
            case .continueReevaluation(let generation):
                pace(then: .reevaluate(generation: generation), into: run.inputs)
            case .recordDiscovery(let scopes, let whenTaken):
                recordDiscovery(scopes, whenTaken: whenTaken)
            case .recordShape(let shape):
                recordShape(shape)
            case .publish, .decide:
                break  // the executor's
            }
        }
    }

    /// Queues `next` (the next batch of a recovery or re-evaluation) once the broker has
    /// acknowledged a publish made after this batch: it has then taken the whole batch (one
    /// connection, in order), libmosquitto holds at most one batch for it, and the messages
    /// that arrived meanwhile are queued before `next` (``BrokerProbes``).
    func pace(then next: Input, into inputs: AsyncStream<Input>.Continuation) {
        probes.start { _ in inputs.yield(next) }
    }

    /// Whether a stop ends its handling now: at the drain limit, or once ``DaemonLimits/outgoing``
    /// publishes wait for the broker. Reading is paused during the stop, so their answers stay
    /// unread and the goodbye waits for all of them: without this bound a busy drain left the
    /// goodbye thousands of answers to wait for behind the messages the broker sends meanwhile,
    /// and a loaded machine ran past its limit. What is not handled waits in the journal.
    func stopHandlingNow() -> Bool {
        if transport.unanswered >= limits.outgoing { return true }
        guard let deadline = stopping.handlingEnds else { return false }
        return ContinuousClock.now >= deadline
    }

    /// Waits until the broker has acknowledged half of ``DaemonLimits/outgoing`` publishes, at most
    /// ``DaemonLimits/outgoingWait``. Its answers come on the same socket as the messages, so the
    /// intake is read meanwhile even when it is full (``IntakeGate/holdOpen(_:)``).
    func waitForBrokerIfBehind(before input: Input) async {
        guard case .message = input, transport.unanswered >= limits.outgoing, !stopping.isRequested else { return }
        report.counters.outgoingWaits += 1
        report.infoDirty = true
        gate.holdOpen(true)
        defer { gate.holdOpen(false) }
        let transport = self.transport
        let target = limits.outgoing / 2
        _ = await FirstOutcome.finished(before: .now + limits.outgoingWait) {
            await transport.waitForAnswers(atMost: target)
            return true
        }
    }
}
