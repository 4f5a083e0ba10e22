import AmpelCore
import AmpelMessages
import Logging
import Synchronization

/// Carries out the ``SessionStateMachine``'s decisions: the client's operations (any thread)
/// and the network thread's reports meet here, on one lock.
///
/// A packet whose answer a task awaits is handed to libmosquitto under that lock, and the
/// waiter registered in the same hold: the network thread matches answers under it too, so an
/// answer can never arrive before its waiter. Continuations are resumed and events yielded
/// after the lock is released.
final class MQTTSession: MosquittoCallbacks, Sendable {
    /// Who waits for the broker's answer to one packet: a suspended task, or a callback for a
    /// caller that must not suspend (``MQTTClient/enqueue(_:acknowledged:)``).
    enum AckWaiter: Sendable {
        case task(UnsafeContinuation<AckResult, Never>)
        /// Called on the network thread, after the session's lock is released.
        case callback(@Sendable (AckResult) -> Void)

        func resume(returning result: AckResult) {
            switch self {
            case .task(let continuation): continuation.resume(returning: result)
            case .callback(let callback): callback(result)
            }
        }
    }
    /// The `connect()` call waiting for CONNACK, and `disconnect()` calls waiting for the
    /// network thread's exit (resumed with `.success(false)`).
    typealias Waiter = CheckedContinuation<Result<Bool, MQTTError>, Never>

    let configuration: MQTTConfiguration
    let logger: Logger
    let mosquitto: MosquittoClient
    let loop: NetworkLoop
    let machine: Mutex<SessionStateMachine<AckWaiter, Waiter>>

    let messageStream: AsyncStream<MQTTMessage>
    let messageContinuation: AsyncStream<MQTTMessage>.Continuation
    /// Set: received messages go here, on the network thread, instead of `messageStream`.
    ///
    /// The closure sits in a class, not directly in the `Mutex`: a function value read and
    /// written back through the generic `inout` of `withLock` is re-abstracted on each access,
    /// and the thunks pile up (one pair per message, until the stack overflows).
    private let handler: Mutex<Handler?>
    final class Handler: Sendable {
        let deliver: @Sendable (MQTTMessage) -> Void
        init(_ deliver: @escaping @Sendable (MQTTMessage) -> Void) { self.deliver = deliver }
    }
    /// Told of every publish the broker refused, with its topic (``MQTTClient/onPublishRefused(_:)``).
    private let refusalHandler = Mutex<RefusalHandler?>(nil)
    final class RefusalHandler: Sendable {
        let refused: @Sendable (_ topic: String, _ reason: Int) -> Void
        init(_ refused: @escaping @Sendable (String, Int) -> Void) { self.refused = refused }
    }
    let eventStream: AsyncStream<MQTTConnectionEvent>
    let eventContinuation: AsyncStream<MQTTConnectionEvent>.Continuation

    /// Tasks waiting for an answer, plus sends about to register one: raised *before* the
    /// libmosquitto call that produces the answer, lowered when a waiter leaves. While it is 0
    /// no answer can have a waiter, so the network thread does not even note answers; with QoS 0
    /// or `enqueue` traffic the network thread and the publishers then never meet on a lock.
    let possibleWaiters = Atomic<Int>(0)
    /// Hands out the tokens by which a cancelled publish or request finds its wait (from 1).
    let nextToken = Atomic<UInt64>(0)
    let sentCount = Atomic<Int>(0)
    let acknowledgedCount = Atomic<Int>(0)
    let receivedCount = Atomic<Int>(0)
    let droppedCount = Atomic<Int>(0)
    let reconnectCount = Atomic<Int>(0)
    let failoverCount = Atomic<Int>(0)
    /// QoS 1/2 publishes handed to libmosquitto and not answered yet (``MQTTClient/unanswered``):
    /// raised after each hand-over, lowered by each publish answer. A QoS 0 publish's
    /// written-note comes through the same callback and must not lower it (the count would
    /// drift below zero and hide as many QoS 1 publishes from a producer bounded by it): the
    /// state machine tells the two apart by message id.
    private let unansweredCount = Atomic<Int>(0)
    /// The state machine's ``SessionStateMachine/unwrittenAtMostOnceCount``, written under its
    /// lock, raised before the libmosquitto call: while it is 0 a publish note is an answer and
    /// the network thread takes no lock to tell; else it tells them apart once per loop step
    /// (``publishesDone(mids:)``), not once per message.
    private let unwrittenAtMostOnce = Atomic<Int>(0)
    /// The count ``waitForAnswers(atMost:)`` waits for (-1: nobody waits), for a lock-free look
    /// on every answer; the waiter itself under `answersWaiter`.
    private let answersTarget = Atomic<Int>(-1)
    private let answersWaiter = Mutex<CheckedContinuation<Void, Never>?>(nil)

    init(configuration: MQTTConfiguration, logger: Logger, handler: (@Sendable (MQTTMessage) -> Void)?) {
        self.configuration = configuration
        self.logger = logger
        self.handler = Mutex(handler.map(Handler.init))
        mosquitto = MosquittoClient(configuration: configuration)
        machine = Mutex(
            SessionStateMachine(
                backoff: Backoff(minimum: configuration.reconnectMinDelay, maximum: configuration.reconnectMaxDelay),
                offlineLimit: configuration.offlineQueueLimit, brokerCount: configuration.endpoints.count))
        let policy: AsyncStream<MQTTMessage>.Continuation.BufferingPolicy =
            switch configuration.overflowPolicy {
            case .dropOldest: .bufferingNewest(max(configuration.incomingBufferSize, 1))
            case .dropNewest: .bufferingOldest(max(configuration.incomingBufferSize, 1))
            }
        (messageStream, messageContinuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: policy)
        (eventStream, eventContinuation) = AsyncStream.makeStream(
            of: MQTTConnectionEvent.self, bufferingPolicy: .bufferingNewest(256))
        loop = NetworkLoop(mosquitto: mosquitto, configuration: configuration)
        mosquitto.install(self)
    }

    deinit {
        messageContinuation.finish()
        eventContinuation.finish()
    }

    /// The broker of the current or last connection (the first of the list before any).
    var brokerName: String { (connectedBroker ?? configuration.endpoints[0]).description }

    /// The broker of the current or last accepted connection; nil before the first.
    var connectedBroker: MQTTConfiguration.Endpoint? {
        machine.withLock { $0.connectedBroker }.map { configuration.endpoints[$0] }
    }

    // MARK: - Connecting

    func connect() async throws(MQTTError) {
        if let error = mosquitto.setupError ?? loop.setupError { throw error }
        try configuration.validate()
        let result: Result<Bool, MQTTError> = await withCheckedContinuation { continuation in
            switch machine.withLock({ $0.connect(continuation) }) {
            case .startNetworkThread: loop.start(for: self)
            case .fail(let error): continuation.resume(returning: .failure(error))
            }
        }
        _ = try result.get()
    }

    /// CONNACK accepted (network thread, between loop steps): restore the subscriptions if the
    /// broker did not keep the session, send what was published while offline, in order, and
    /// let publishers call libmosquitto directly again, all in one lock hold so that no new
    /// publish overtakes a queued one.
    func connectionEstablished(sessionPresent: Bool) {
        var failed: [(AckWaiter, MQTTError)] = []
        var resubscribed: [(filters: [String], rc: Int32)] = []
        let established = machine.withLock { machine -> SessionStateMachine<AckWaiter, Waiter>.Established? in
            guard let established = machine.connectionEstablished(sessionPresent: sessionPresent) else { return nil }
            for qos in MQTTQoS.allCases {
                let filters = established.resubscribe.filter { $0.qos == qos }.map(\.filter)
                // Its SUBACK finds no waiter and is dropped.
                if !filters.isEmpty { resubscribed.append((filters, mosquitto.subscribe(filters, qos: qos).rc)) }
            }
            for entry in established.offline {
                let (refused, mid) = handOver(entry.message, withWaiter: entry.waiter != nil, machine: &machine)
                guard let waiter = entry.waiter else { continue }
                if let refused {
                    failed.append((waiter, .mosquitto(refused, "publish to '\(entry.message.topic)' rejected")))
                } else {
                    machine.sent(mid: mid, token: entry.token, waiter: waiter)
                }
            }
            return established
        }
        for (filters, rc) in resubscribed {
            if rc == MosquittoResult.success {
                logger.info("MQTT re-subscribed", metadata: ["filters": "\(filters)"])
            } else {
                logger.error("MQTT re-subscribe failed", metadata: ["filters": "\(filters)", "error": "\(MosquittoLibrary.describe(rc))"])
            }
        }
        for (waiter, error) in failed { waiter.resume(returning: .failed(error)) }
        guard let established else { return }
        if !established.first { reconnectCount.add(1, ordering: .relaxed) }
        if established.failover { failoverCount.add(1, ordering: .relaxed) }
        logger.info(
            established.first ? "MQTT connected" : established.failover ? "MQTT failed over to another broker" : "MQTT reconnected",
            metadata: ["broker": "\(configuration.endpoints[established.broker])", "sessionPresent": "\(sessionPresent)"])
        eventContinuation.yield(.connected(sessionPresent: sessionPresent))
        established.connectWaiter?.resume(returning: .success(sessionPresent))
    }

    /// A connection ended or an attempt failed (network thread). Returns the delay before the
    /// next attempt and the broker to try, or nil when the thread is to end.
    func connectionEnded(_ error: MQTTError) -> (delay: Duration, broker: MQTTConfiguration.Endpoint)? {
        let decision = machine.withLock { machine in
            defer { unwrittenAtMostOnce.store(machine.unwrittenAtMostOnceCount, ordering: .sequentiallyConsistent) }
            return machine.connectionEnded(error, random: Double.random(in: 0..<1))
        }
        switch decision {
        case .reconnect(let delay, let lost, let index):
            if let lost { reportLoss(lost) }
            let next = configuration.endpoints[index]
            if lost == nil && configuration.endpoints.count > 1 {
                logger.notice("MQTT broker did not answer; trying the next", metadata: ["error": "\(error.message)", "next": "\(next)", "delay": "\(delay)"])
            } else if lost == nil {
                // A failed attempt says why: a password changed on the broker must be seen.
                logger.notice("MQTT reconnect failed; retrying", metadata: ["error": "\(error.message)", "broker": "\(next)", "delay": "\(delay)"])
            } else {
                logger.debug("MQTT reconnecting", metadata: ["delay": "\(delay)", "broker": "\(next)"])
            }
            if lost == nil { eventContinuation.yield(.reconnectFailed(reason: error)) }
            return (delay, next)
        case .stop(let failedConnect, let lost):
            if let lost { reportLoss(lost) }
            if let (waiter, error) = failedConnect { waiter.resume(returning: .failure(error)) }
            return nil
        }
    }

    private func reportLoss(_ reason: MQTTError) {
        logger.notice("MQTT connection lost", metadata: ["broker": "\(brokerName)", "reason": "\(reason.message)"])
        eventContinuation.yield(.disconnected(reason: reason))
    }

    // MARK: - Publishing

    func publish(_ message: OutgoingMessage) async throws(MQTTError) {
        // Hot path: no checks of our own before the call; libmosquitto validates the topic, and
        // the readable reason is worked out only when it refuses.
        try checkExpiry(message)
        let topic = message.topic
        if message.qos == .atMostOnce {
            try sendQoS0(message)
            return
        }
        if let error = MQTTTopicFilter.validateTopicName(topic) { throw error }  // before it may wait offline
        // Drawn before anything can be cancelled: the cancellation handler finds the wait by it.
        let token = nextToken.add(1, ordering: .relaxed).newValue
        let result: AckResult = await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                if let immediate = submit(message, token: token, waiter: .task(continuation)) {
                    continuation.resume(returning: immediate)
                }
            }
        } onCancel: {
            cancelWait(token)
        }
        if let error = Self.failure(of: result, topic: topic) { throw error }
        acknowledgedCount.add(1, ordering: .relaxed)
    }

    /// Sends or queues an awaited QoS 1/2 publish; returns the answer if there is one already
    /// (refused, closed, cancelled), nil when `waiter` now waits in the state machine.
    private func submit(_ message: OutgoingMessage, token: UInt64, waiter: AckWaiter) -> AckResult? {
        let (placement, cancelled) = machine.withLock { machine in
            // Checked under the lock, which the cancellation handler takes too: either it ran
            // before (and this sees the flag) or it finds the waiter.
            let cancelled = Task.isCancelled
            return (place(message, token: token, waiter: cancelled ? nil : waiter, machine: &machine), cancelled)
        }
        if let error = placementError(placement, message) { return .failed(error) }
        sentCount.add(1, ordering: .relaxed)
        guard cancelled else { return nil }
        if case .sent(let mid) = placement { return .failed(SessionErrors.cancelled(mid)) }
        return .failed(SessionErrors.cancelled(nil))
    }

    /// What became of a QoS 1/2 publish the state machine was asked about.
    enum Placement { case queued, sent(mid: Int32), refused(Int32), full, closed }

    /// The one way of a QoS 1/2 publish to libmosquitto, under the session's lock: the state
    /// machine says send, queue or refuse; what it takes counts as unanswered (``handedOver()``);
    /// a waiter, if any, is registered for the answer.
    func place(_ message: OutgoingMessage, token: UInt64, waiter: AckWaiter?,
               machine: inout SessionStateMachine<AckWaiter, Waiter>) -> Placement {
        switch machine.publish(message, token: token, waiter: waiter) {
        case .queued:
            handedOver()
            return .queued
        case .offlineQueueFull: return .full
        case .closed: return .closed
        case .send:
            handedOver()
            let (refused, mid) = handOver(message, withWaiter: waiter != nil, machine: &machine)
            if let refused { return .refused(refused) }
            if let waiter { machine.sent(mid: mid, token: token, waiter: waiter) }
            return .sent(mid: mid)
        }
    }

    /// The error of a publish that was not taken; `nil` when it was sent or queued.
    func placementError(_ placement: Placement, _ message: OutgoingMessage) -> MQTTError? {
        switch placement {
        case .queued, .sent: nil
        case .refused(let rc): publishFailure(rc, topic: message.topic, qos: message.qos)
        case .full: SessionErrors.offlineQueueFull(message.topic, limit: configuration.offlineQueueLimit)
        case .closed: SessionErrors.closed
        }
    }

    /// libmosquitto drops a QoS 0 publish while disconnected (MOSQ_ERR_NO_CONN): say so.
    func sendQoS0(_ message: OutgoingMessage) throws(MQTTError) {
        let rc: Int32 = machine.withLock { machine in
            guard machine.isConnected else { return MosquittoResult.noConnection }
            // Raised first: a written-note that comes before the id is recorded waits for this lock.
            unwrittenAtMostOnce.add(1, ordering: .sequentiallyConsistent)
            let (rc, mid) = mosquitto.publish(message)
            if rc == MosquittoResult.success { machine.sentAtMostOnce(mid: mid) }
            unwrittenAtMostOnce.store(machine.unwrittenAtMostOnceCount, ordering: .sequentiallyConsistent)
            loop.wakeIfIdle()
            return rc
        }
        guard rc == MosquittoResult.success else { throw publishFailure(rc, topic: message.topic, qos: .atMostOnce) }
        sentCount.add(1, ordering: .relaxed)
    }

    /// What went wrong with a publish by its answer; `nil` when the broker took it.
    static func failure(of result: AckResult, topic: String) -> MQTTError? {
        switch result {
        case .published(let reason) where reason < 0x80:
            return nil
        case .published(let reason):
            return MQTTError(
                code: .rejected, reasonCode: Int(reason),
                message: "broker rejected publish to '\(topic)': \(MosquittoLibrary.describeReason(reason))")
        case .failed(let error):
            return error
        case .subscribed, .unsubscribed:
            return MQTTError(code: .protocolError, message: "publish to '\(topic)' answered by a (un)subscribe acknowledgement")
        }
    }

    /// Message expiry needs MQTT 5.
    func checkExpiry(_ message: OutgoingMessage) throws(MQTTError) {
        guard message.expiry == nil || configuration.protocolVersion == .v5 else {
            throw MQTTError(code: .notSupported, message: "message expiry needs MQTT 5 (protocolVersion is 3.1.1)")
        }
    }

    /// Why a publish was refused, in words: closed client, bad topic, no connection. Takes the
    /// lock: never call it while holding it.
    func publishFailure(_ rc: Int32, topic: String, qos: MQTTQoS) -> MQTTError {
        if machine.withLock({ $0.isClosed }) { return SessionErrors.closed }
        if rc == MosquittoResult.invalid || rc == MosquittoResult.malformedUTF8 {
            return MQTTTopicFilter.validateTopicName(topic)
                ?? MQTTError(code: .invalidTopic, message: "invalid topic '\(topic)': not accepted by libmosquitto (invalid UTF-8?)")
        }
        if rc == MosquittoResult.noConnection && qos == .atMostOnce {
            return .mosquitto(rc, "publish (QoS 0) to '\(topic)' not sent (libmosquitto would drop it)")
        }
        return .mosquitto(rc, "publish to '\(topic)' rejected")
    }

    // MARK: - Answers and cancellation

    /// Hands a QoS 1/2 publish the state machine said to send to libmosquitto, under the
    /// session's lock: `refused` is libmosquitto's code when it did not take it. `withWaiter`:
    /// somebody awaits the answer, so the network thread must note it (``possibleWaiters``,
    /// raised before the call that produces the answer). The caller counted the message in
    /// ``unanswered`` when the state machine took it (``handedOver()``); a refusal here uncounts it.
    func handOver(_ message: OutgoingMessage, withWaiter: Bool,
                  machine: inout SessionStateMachine<AckWaiter, Waiter>) -> (refused: Int32?, mid: Int32) {
        if withWaiter { possibleWaiters.add(1, ordering: .sequentiallyConsistent) }
        let (rc, mid) = mosquitto.publish(message)
        loop.wakeIfIdle()
        // MOSQ_ERR_NO_CONN: the connection just broke, but libmosquitto keeps the message
        // queued and sends it after the reconnect.
        guard rc == MosquittoResult.success || rc == MosquittoResult.noConnection else {
            if withWaiter { possibleWaiters.subtract(1, ordering: .sequentiallyConsistent) }
            publishesAnswered(1)
            return (rc, mid)
        }
        // The topic names a refusal: only MQTT 5 has reason codes on PUBACK/PUBREC.
        if configuration.protocolVersion == .v5 { machine.noteTopic(message.topic, mid: mid) }
        return (nil, mid)
    }

    /// A QoS 1/2 publish the state machine took is now libmosquitto's until the broker answers, or waits offline for
    /// the connection (the producer that waits on ``unanswered`` is held back by those too: a
    /// backlog handled while disconnected would otherwise fill the offline queue and lose
    /// publishes beyond its limit).
    @inline(__always)
    func handedOver() {
        unansweredCount.add(1, ordering: .relaxed)
    }

    var unanswered: Int { max(0, unansweredCount.load(ordering: .relaxed)) }

    /// libmosquitto reported message id `mid` done: a publish answer or a QoS 0 written-note
    /// (network thread). `false` while QoS 0 publishes are unwritten: the note may be one, and
    /// the caller hands it to ``publishesDone(mids:)`` with the others of its loop step.
    @inline(__always)
    func publishDone(mid: Int32) -> Bool {
        if unwrittenAtMostOnce.load(ordering: .sequentiallyConsistent) > 0 { return false }
        publishesAnswered(1)
        return true
    }

    /// Tells written-notes from answers among `mids`, in one lock hold (network thread, at the
    /// end of a loop step, and always before the connection's end is reported).
    func publishesDone(mids: [Int32]) {
        let answers = machine.withLock { machine in
            defer { unwrittenAtMostOnce.store(machine.unwrittenAtMostOnceCount, ordering: .sequentiallyConsistent) }
            return mids.reduce(0) { count, mid in machine.publishDone(mid: mid) ? count + 1 : count }
        }
        if answers > 0 { publishesAnswered(answers) }
    }

    @inline(__always)
    func publishesAnswered(_ count: Int) {
        let left = unansweredCount.subtract(count, ordering: .relaxed).newValue
        let target = answersTarget.load(ordering: .relaxed)
        if target >= 0 && left <= target { releaseAnswersWaiter() }
    }

    /// Returns once at most `target` publishes are unanswered, or the client is closed. One
    /// waiter at a time: a new call ends the previous one's wait.
    func waitForAnswers(atMost target: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // The target is set under the waiter's lock, and cleared with it: a release that
            // takes an older waiter cannot clear a newer waiter's target.
            let previous = answersWaiter.withLock { waiter in
                defer {
                    waiter = continuation
                    answersTarget.store(target, ordering: .sequentiallyConsistent)
                }
                return waiter
            }
            previous?.resume()
            // Answers that came before the target was set find it on this look.
            if unanswered <= target || machine.withLock({ $0.isClosed }) { releaseAnswersWaiter() }
        }
    }

    func releaseAnswersWaiter() {
        let waiter = answersWaiter.withLock { waiter in
            defer {
                waiter = nil
                answersTarget.store(-1, ordering: .sequentiallyConsistent)
            }
            return waiter
        }
        waiter?.resume()
    }

    /// Resumes the tasks waiting for these answers (network thread, in batches): one lock hold
    /// for all of them instead of one per PUBACK, and the resumed tasks enqueued in one burst,
    /// which wakes a pool thread once for the lot rather than once per message (a task on the
    /// client's ``NetworkThreadExecutor`` wakes none: it runs on this thread next).
    func resume(answers: [(mid: Int32, result: AckResult)]) {
        let ready: [(AckWaiter, AckResult)] = machine.withLock { machine in
            answers.compactMap { answer in machine.answered(mid: answer.mid).map { ($0, answer.result) } }
        }
        if ready.isEmpty { return }
        possibleWaiters.subtract(ready.count, ordering: .sequentiallyConsistent)
        for (waiter, result) in ready { waiter.resume(returning: result) }
    }

    /// The task with `token` was cancelled: stop its wait, wherever it is (offline or sent).
    func cancelWait(_ token: UInt64) {
        guard let (waiter, mid) = machine.withLock({ $0.cancel(token: token) }) else { return }
        if mid != nil { possibleWaiters.subtract(1, ordering: .sequentiallyConsistent) }
        waiter.resume(returning: .failed(SessionErrors.cancelled(mid)))
    }

    // MARK: - Receiving

    /// Tells `handler` of every publish the broker refuses from now on.
    func onRefused(_ handler: @escaping @Sendable (String, Int) -> Void) {
        let boxed = RefusalHandler(handler)
        refusalHandler.withLock { $0 = boxed }
    }

    /// The broker answered these MQTT 5 publishes (network thread, at the end of a loop step):
    /// in one lock hold the refused ones' (a reason of 0x80 or above) topics are looked up and
    /// every one's topic let go; the refusals are reported outside it.
    func settle(_ answers: [(mid: Int32, reason: Int32)]) {
        let named = machine.withLock { machine in
            defer { machine.forgetTopics(answers.lazy.map(\.mid)) }
            return answers.filter { $0.reason >= 0x80 }.map { (machine.topic(mid: $0.mid), $0.reason) }
        }
        guard !named.isEmpty, let handler = refusalHandler.withLock({ $0 }) else { return }
        for (topic, reason) in named { handler.refused(topic ?? "?", Int(reason)) }
    }

    /// Sends every message from now on to `deliver` instead of the stream.
    func deliver(to deliver: @escaping @Sendable (MQTTMessage) -> Void) {
        let boxed = Handler(deliver)
        handler.withLock { $0 = boxed }
    }

    // MARK: - libmosquitto's callbacks (network thread, inside a loop step)

    /// The connection's events go to the network loop, which acts on them between loop steps.
    func connack(reason: Int32, sessionPresent: Bool) { loop.connack(reason: reason, sessionPresent: sessionPresent) }
    func disconnected(reason: Int32) { loop.disconnected(reason: reason) }
    func logged(_ line: String) { loop.logged(line) }
    func answered(mid: Int32, _ result: AckResult) { loop.answered(mid: mid, result, self) }

    /// A message arrived: straight to the daemon's handler or the stream, not through the loop.
    func received(_ message: MQTTMessage) {
        receivedCount.add(1, ordering: .relaxed)
        if let handler = handler.withLock({ $0 }) {
            handler.deliver(message)
            return
        }
        if case .dropped = messageContinuation.yield(message) { droppedCount.add(1, ordering: .relaxed) }
    }
}
