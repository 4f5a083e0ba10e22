import AmpelCore
import AmpelMessages

/// The decisions of one MQTT client session, without I/O: what to do with a publish, an answer,
/// a lost connection, a stop.
///
/// Written the way postgres-nio writes its connection state machines: plain values, one state
/// enum whose cases carry what that phase holds (the tasks waiting for answers, the messages
/// published while offline, the subscriptions to restore), `mutating` events in, decisions out.
/// ``MQTTSession`` keeps it in a lock and carries the decisions out; the network thread
/// (``NetworkLoop``) reports what happened on the connection. Tests drive it directly
/// (`SessionStateMachineTests`), with plain values as waiters.
///
/// The phases:
/// ```
/// idle --connect--> connecting --CONNACK--> connected --loss--> reconnecting --CONNACK--> connected
///  ^                    | first attempt failed                      (backoff, retries)
///  +--------------------+
/// any --disconnect--> closing --network thread exited--> closed
/// ```
///
/// - `AckWaiter`: a task waiting for the broker's answer to one packet (a continuation in the
///   client, a number in the tests).
/// - `Waiter`: a task waiting for the session itself: the first CONNACK, or the network
///   thread's exit.
struct SessionStateMachine<AckWaiter, Waiter> {
    /// A publish kept while there is no connection, sent in order after the next CONNACK.
    struct Queued {
        /// The publishing task's token (0 for `enqueue`, which nobody cancels).
        var token: UInt64
        var message: OutgoingMessage
        /// Nil once the publishing task stopped waiting (cancelled); the message is still sent.
        var waiter: AckWaiter?
    }

    struct Subscription: Hashable {
        var filter: String
        var qos: MQTTQoS
    }

    /// What every phase of a started session holds.
    struct Session {
        /// Tasks waiting for the answer to a message id. Kept across reconnects: libmosquitto
        /// resends unacknowledged QoS 1 messages with the same id on the new connection.
        var acks = AckTable<AckWaiter>()
        /// Publishes waiting for a connection (empty while connected).
        var offline: [Queued] = []
        /// Filters the broker acknowledged, in subscription order: restored after a reconnect
        /// that did not keep the session.
        var subscriptions: [Subscription] = []
        var everConnected = false
        /// QoS 0 publishes handed to libmosquitto whose written-note has not come yet. libmosquitto
        /// reports a QoS 0 publish written and a QoS 1/2 publish answered through the same
        /// callback with nothing but the message id; these ids tell the two apart, so that only
        /// answers lower the unanswered count. Emptied when the connection ends: libmosquitto
        /// drops the QoS 0 packets it had not written, and their ids come round again.
        var unwrittenAtMostOnce: Set<Int32> = []
        /// The topics of the QoS 1/2 publishes by message id, for a refusal to name.
        var topics = PublishTopics()
        /// The broker (index in the configured list) of the current or next attempt.
        var broker = 0
        /// The broker of the last accepted connection; nil before the first.
        var connectedBroker: Int?
        /// Accepted connections to another broker than the one before.
        var failovers = 0
    }

    enum State {
        /// Not started, or the first connect failed (`connect()` may be called again).
        case idle(Session)
        /// The first connect: `waiter` is the `connect()` call waiting for CONNACK.
        case connecting(Session, waiter: Waiter)
        case connected(Session)
        /// The connection was lost; `failedAttempts` since then decide the next backoff.
        case reconnecting(Session, failedAttempts: Int)
        /// `disconnect()` was called; the network thread is winding down (after its DISCONNECT,
        /// if `connectionUp`).
        case closing(Session, connectWaiter: Waiter?, exitWaiters: [Waiter], connectionUp: Bool)
        case closed
        /// Only while an event changes the payload in place (no copy of the tables).
        case modifying
    }

    private(set) var state: State = .idle(Session())
    /// Whether a packet may go to libmosquitto now: only between CONNACK and the loss of the
    /// connection (libmosquitto 2.0 drops packets queued while a connect resets the connection).
    /// The `connected` phase as a plain flag, set by the transitions into and out of it: every
    /// publish asks this first, and a flag costs no look at the enum's payload.
    private(set) var isConnected = false
    let backoff: Backoff
    /// Publishes kept while offline, at most; more are refused.
    let offlineLimit: Int
    /// How many brokers the configuration lists (nodes of one cluster): attempts go through
    /// them in order, see ``connectionEnded(_:random:)``.
    let brokerCount: Int

    init(backoff: Backoff, offlineLimit: Int, brokerCount: Int = 1) {
        self.backoff = backoff
        self.offlineLimit = offlineLimit
        self.brokerCount = max(brokerCount, 1)
    }

    // MARK: - Connecting

    enum ConnectDecision {
        case startNetworkThread
        case fail(MQTTError)
    }

    /// `connect()` was called.
    mutating func connect(_ waiter: Waiter) -> ConnectDecision {
        switch state {
        case .idle(let session):
            state = .connecting(session, waiter: waiter)
            return .startNetworkThread
        case .closing, .closed:
            return .fail(SessionErrors.closed)
        case .connecting, .connected, .reconnecting:
            return .fail(MQTTError(code: .alreadyConnected, message: "connect() called while already connected or connecting"))
        case .modifying:
            preconditionFailure("SessionStateMachine: event while modifying")
        }
    }

    /// What to do once the broker accepted a connection. The session sends `resubscribe` and
    /// then `offline`, in order, before any new publish (it holds its lock throughout).
    struct Established {
        var first: Bool
        /// The broker (index in the list) that accepted.
        var broker: Int
        /// Set when an earlier connection was to another broker of the list.
        var failover: Bool
        var resubscribe: [Subscription]
        var offline: [Queued]
        var connectWaiter: Waiter?
    }

    /// CONNACK accepted. Returns nil when the session is closing: the network thread then only
    /// sends DISCONNECT.
    mutating func connectionEstablished(sessionPresent: Bool) -> Established? {
        switch state {
        case .connecting(var session, let waiter):
            state = .modifying
            let established = Self.establish(&session, sessionPresent: sessionPresent, waiter: waiter)
            state = .connected(session)
            isConnected = true
            return established
        case .reconnecting(var session, _):
            state = .modifying
            let established = Self.establish(&session, sessionPresent: sessionPresent, waiter: nil)
            state = .connected(session)
            isConnected = true
            return established
        case .closing(var session, let connectWaiter, let exitWaiters, _):
            // The connect() call still gets its answer; the publishes wait to be failed at exit.
            session.everConnected = true
            state = .closing(session, connectWaiter: nil, exitWaiters: exitWaiters, connectionUp: true)
            return connectWaiter.map {
                Established(first: true, broker: session.broker, failover: false, resubscribe: [], offline: [], connectWaiter: $0)
            }
        case .idle, .connected, .closed:
            return nil
        case .modifying:
            preconditionFailure("SessionStateMachine: event while modifying")
        }
    }

    private static func establish(_ session: inout Session, sessionPresent: Bool, waiter: Waiter?) -> Established {
        let first = !session.everConnected
        session.everConnected = true
        let failover = session.connectedBroker.map { $0 != session.broker } ?? false
        if failover { session.failovers += 1 }
        session.connectedBroker = session.broker
        let offline = session.offline
        session.offline = []
        let resubscribe = sessionPresent || first ? [] : session.subscriptions
        return Established(
            first: first, broker: session.broker, failover: failover, resubscribe: resubscribe, offline: offline,
            connectWaiter: waiter)
    }

    /// What the network thread does after a connection ended (or an attempt failed).
    enum AfterConnection {
        /// Try `broker` (index in the list) after `delay`. `lost` is set when an established
        /// connection was lost.
        case reconnect(after: Duration, lost: MQTTError?, broker: Int)
        /// The thread ends. `failedConnect`: the first `connect()` gets this error.
        case stop(failedConnect: (Waiter, MQTTError)?, lost: MQTTError?)
    }

    /// A connection ended or an attempt failed, with `error` as the reason. `random` (`0..<1`)
    /// is the backoff's random share (``Backoff/delay(attempt:random:)``); the caller draws it so
    /// that the decision stays repeatable.
    ///
    /// With several brokers (nodes of one cluster, which share the session): the first
    /// `connect()` tries them in order without delay and fails only when none answered; after a
    /// connection is lost, each attempt goes to the next broker of the list (round the end),
    /// so the one that just failed is tried last, with the usual backoff between attempts; the
    /// backoff grows once per round of the list, not per attempt: a cluster that elects new
    /// leaders for a few seconds after losing a node would otherwise push the attempt that
    /// finds it ready out by the sum of a growing series (14.6 s seen with three nodes, 0.4 s
    /// when the first attempt came after the election).
    mutating func connectionEnded(_ error: MQTTError, random: Double) -> AfterConnection {
        switch state {
        case .connecting(var session, let waiter):
            if session.broker + 1 < brokerCount {
                session.broker += 1
                state = .connecting(session, waiter: waiter)
                return .reconnect(after: .zero, lost: nil, broker: session.broker)
            }
            session.broker = 0
            state = .idle(session)
            return .stop(failedConnect: (waiter, error), lost: nil)
        case .connected(var session):
            session.unwrittenAtMostOnce.removeAll()
            session.broker = (session.broker + 1) % brokerCount
            state = .reconnecting(session, failedAttempts: 1)
            isConnected = false
            return .reconnect(after: backoff.delay(attempt: 1, random: random), lost: error, broker: session.broker)
        case .reconnecting(var session, let failedAttempts):
            session.broker = (session.broker + 1) % brokerCount
            state = .reconnecting(session, failedAttempts: failedAttempts + 1)
            let round = failedAttempts / brokerCount + 1
            return .reconnect(after: backoff.delay(attempt: round, random: random), lost: nil, broker: session.broker)
        case .closing(let session, let connectWaiter, let exitWaiters, let connectionUp):
            state = .closing(session, connectWaiter: nil, exitWaiters: exitWaiters, connectionUp: false)
            return .stop(
                failedConnect: connectWaiter.map { ($0, SessionErrors.closed) },
                lost: connectionUp ? SessionErrors.requestedDisconnect : nil)
        case .idle, .closed:
            return .stop(failedConnect: nil, lost: nil)
        case .modifying:
            preconditionFailure("SessionStateMachine: event while modifying")
        }
    }

    // MARK: - Publishing

    enum PublishDecision: Equatable {
        /// Hand it to libmosquitto now (under the session's lock), then report ``sent(mid:token:waiter:)``.
        case send
        /// Kept until the next CONNACK.
        case queued
        case offlineQueueFull
        case closed
    }

    var isClosed: Bool {
        switch state {
        case .closing, .closed: return true
        default: return false
        }
    }

    /// A QoS 1/2 publish (QoS 0 is only ever sent while ``isConnected``: libmosquitto drops it
    /// while disconnected, and queueing it here would promise what QoS 0 does not).
    mutating func publish(_ message: OutgoingMessage, token: UInt64, waiter: AckWaiter?) -> PublishDecision {
        if isConnected { return .send }
        switch state {
        case .connected:
            return .send
        case .idle(var session):
            guard session.offline.count < offlineLimit else { return .offlineQueueFull }
            state = .modifying
            session.offline.append(Queued(token: token, message: message, waiter: waiter))
            state = .idle(session)
            return .queued
        case .connecting(var session, let connectWaiter):
            guard session.offline.count < offlineLimit else { return .offlineQueueFull }
            state = .modifying
            session.offline.append(Queued(token: token, message: message, waiter: waiter))
            state = .connecting(session, waiter: connectWaiter)
            return .queued
        case .reconnecting(var session, let failedAttempts):
            guard session.offline.count < offlineLimit else { return .offlineQueueFull }
            state = .modifying
            session.offline.append(Queued(token: token, message: message, waiter: waiter))
            state = .reconnecting(session, failedAttempts: failedAttempts)
            return .queued
        case .closing, .closed:
            return .closed
        case .modifying:
            preconditionFailure("SessionStateMachine: event while modifying")
        }
    }

    /// libmosquitto took a QoS 1/2 publish to `topic` with message id `mid`.
    mutating func noteTopic(_ topic: String, mid: Int32) {
        modifySession { $0.topics.note(topic, mid: mid) }
    }

    /// The topic of the QoS 1/2 publish with message id `mid`, as far as it is known.
    func topic(mid: Int32) -> String? {
        withSession { $0.topics[mid] } ?? nil
    }

    /// The publishes with these ids are answered: their topics are no longer needed.
    mutating func forgetTopics(_ mids: some Sequence<Int32>) {
        modifySession { session in
            for mid in mids { session.topics.forget(mid: mid) }
        }
    }

    /// Topics held for unanswered publishes (for the tests).
    var heldTopics: Int { withSession { $0.topics.count } ?? 0 }

    /// libmosquitto took a packet with message id `mid` (publish, subscribe, unsubscribe) for
    /// which `waiter` waits. Called under the same lock as the libmosquitto call, so that the
    /// answer, matched under that lock too, cannot come first.
    mutating func sent(mid: Int32, token: UInt64, waiter: AckWaiter) {
        modifySession { $0.acks.wait(mid: mid, token: token, waiter) }
    }

    /// libmosquitto took a QoS 0 publish with message id `mid`; its written-note answers nothing.
    mutating func sentAtMostOnce(mid: Int32) {
        modifySession { _ = $0.unwrittenAtMostOnce.insert(mid) }
    }

    /// libmosquitto reported message id `mid` done: a QoS 0 publish written, or a QoS 1/2
    /// publish answered. True for an answer (which lowers the unanswered count), false for the
    /// written-note of a QoS 0 publish (which never raised it).
    mutating func publishDone(mid: Int32) -> Bool {
        modifySession { $0.unwrittenAtMostOnce.remove(mid) == nil } ?? true
    }

    /// QoS 0 publishes handed over and not written yet.
    var unwrittenAtMostOnceCount: Int { withSession { $0.unwrittenAtMostOnce.count } ?? 0 }

    /// The broker answered message id `mid`. Returns whoever waits for it; nobody does for
    /// QoS 0, `enqueue`d publishes, re-subscribes and cancelled waits.
    mutating func answered(mid: Int32) -> AckWaiter? {
        modifySession { $0.acks.answer(mid: mid) } ?? nil
    }

    /// The task with `token` was cancelled: its wait ends, wherever it is (offline or sent); the
    /// message itself still goes out. Nil if the answer came first or the task never registered.
    mutating func cancel(token: UInt64) -> (waiter: AckWaiter, mid: Int32?)? {
        modifySession { session -> (AckWaiter, Int32?)? in
            if let index = session.offline.firstIndex(where: { $0.token == token }),
                let waiter = session.offline[index].waiter
            {
                session.offline[index].waiter = nil
                return (waiter, nil)
            }
            return session.acks.cancel(token: token).map { ($0.waiter, $0.mid) }
        } ?? nil
    }

    // MARK: - Subscriptions

    enum RequestDecision: Equatable {
        case send
        case notConnected
        case closed
    }

    /// SUBSCRIBE and UNSUBSCRIBE need a connection: their answer says what the broker granted,
    /// which a queued request could not tell in time.
    var requestDecision: RequestDecision {
        switch state {
        case .connected: return .send
        case .closing, .closed: return .closed
        default: return .notConnected
        }
    }

    /// The broker granted these subscriptions: restore them after a reconnect without session.
    mutating func subscribed(_ granted: [Subscription]) {
        modifySession { session in
            for subscription in granted {
                session.subscriptions.removeAll { $0.filter == subscription.filter }
                session.subscriptions.append(subscription)
            }
        }
    }

    mutating func unsubscribed(_ filters: [String]) {
        modifySession { session in session.subscriptions.removeAll { filters.contains($0.filter) } }
    }

    // MARK: - Stopping

    enum DisconnectDecision {
        /// Stop the network thread (which sends DISCONNECT if connected) and wait for its exit.
        case stopNetworkThread
        /// Already stopping: wait for the thread's exit with the others.
        case wait
        /// Nothing runs: closed now; fail these, finish the streams, resume the caller.
        case closedNow(Closed)
        case alreadyClosed
    }

    /// What the session fails and resumes when it closes.
    struct Closed {
        var failed: [AckWaiter]
        var connectWaiter: Waiter?
        var exitWaiters: [Waiter]
    }

    /// `disconnect()` (with the caller as `waiter`) or the client's release (nil).
    mutating func disconnect(_ waiter: Waiter?) -> DisconnectDecision {
        let exitWaiters = waiter.map { [$0] } ?? []
        switch state {
        case .idle(let session):
            state = .closed
            return .closedNow(Self.close(session, connectWaiter: nil, exitWaiters: exitWaiters))
        case .connecting(let session, let connectWaiter):
            state = .closing(session, connectWaiter: connectWaiter, exitWaiters: exitWaiters, connectionUp: false)
            return .stopNetworkThread
        case .connected(let session):
            state = .closing(session, connectWaiter: nil, exitWaiters: exitWaiters, connectionUp: true)
            isConnected = false
            return .stopNetworkThread
        case .reconnecting(let session, _):
            state = .closing(session, connectWaiter: nil, exitWaiters: exitWaiters, connectionUp: false)
            return .stopNetworkThread
        case .closing(let session, let connectWaiter, let waiting, let connectionUp):
            state = .closing(session, connectWaiter: connectWaiter, exitWaiters: waiting + exitWaiters, connectionUp: connectionUp)
            return .wait
        case .closed:
            return .alreadyClosed
        case .modifying:
            preconditionFailure("SessionStateMachine: event while modifying")
        }
    }

    /// The network thread ended. Returns what to fail and resume, or nil if the session goes on
    /// (a first connect failed; `connect()` may be called again).
    mutating func networkThreadExited() -> Closed? {
        guard case .closing(let session, let connectWaiter, let exitWaiters, _) = state else { return nil }
        state = .closed
        return Self.close(session, connectWaiter: connectWaiter, exitWaiters: exitWaiters)
    }

    private static func close(_ session: Session, connectWaiter: Waiter?, exitWaiters: [Waiter]) -> Closed {
        var session = session
        return Closed(
            failed: session.offline.compactMap(\.waiter) + session.acks.takeAll(),
            connectWaiter: connectWaiter, exitWaiters: exitWaiters)
    }

    // MARK: - Reading

    /// Number of tasks waiting for an answer (tests and diagnostics).
    var waitingCount: Int { withSession { $0.acks.waitingCount } ?? 0 }
    /// Number of publishes kept for the next connection.
    var offlineCount: Int { withSession { $0.offline.count } ?? 0 }
    var subscriptions: [Subscription] { withSession { $0.subscriptions } ?? [] }
    /// The broker (index in the list) of the current or last accepted connection.
    var connectedBroker: Int? { withSession { $0.connectedBroker } ?? nil }
    /// Accepted connections to another broker than the one before.
    var failovers: Int { withSession { $0.failovers } ?? 0 }

    private func withSession<R>(_ body: (Session) -> R) -> R? {
        switch state {
        case .idle(let session), .connecting(let session, _), .connected(let session), .reconnecting(let session, _),
            .closing(let session, _, _, _):
            return body(session)
        case .closed, .modifying:
            return nil
        }
    }

    /// Changes the session in place, whatever the phase; nil once closed.
    private mutating func modifySession<R>(_ body: (inout Session) -> R) -> R? {
        switch state {
        case .idle(var session):
            state = .modifying
            defer { state = .idle(session) }
            return body(&session)
        case .connecting(var session, let waiter):
            state = .modifying
            defer { state = .connecting(session, waiter: waiter) }
            return body(&session)
        case .connected(var session):
            state = .modifying
            defer { state = .connected(session) }
            return body(&session)
        case .reconnecting(var session, let failedAttempts):
            state = .modifying
            defer { state = .reconnecting(session, failedAttempts: failedAttempts) }
            return body(&session)
        case .closing(var session, let connectWaiter, let exitWaiters, let connectionUp):
            state = .modifying
            defer { state = .closing(session, connectWaiter: connectWaiter, exitWaiters: exitWaiters, connectionUp: connectionUp) }
            return body(&session)
        case .closed:
            return nil
        case .modifying:
            preconditionFailure("SessionStateMachine: event while modifying")
        }
    }
}
