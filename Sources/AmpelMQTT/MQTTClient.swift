import AmpelMessages
import Logging
import Synchronization

/// An MQTT 3.1.1 / 5 client on libmosquitto with an async, `Sendable` API.
///
/// One client holds one broker connection and keeps it up: after a loss it reconnects with a
/// bounded, jittered backoff, re-subscribes when the broker did not keep the session, and sends
/// QoS 1 messages that were published while it was away.
///
/// ```swift
/// let client = MQTTClient(configuration: .init(host: "localhost", clientID: "ampel"))
/// try await client.connect()
/// try await client.subscribe([("owntracks/+/+", .atLeastOnce)])
/// Task { for await message in client.messages { route(message) } }
/// try await client.publish(topic: "ampel/status", payload: Array("online".utf8), qos: .atLeastOnce, retain: true)
/// await client.disconnect()
/// ```
///
/// > Note: ``messages`` is a single stream: with two consumers, each message goes to one of
/// > them. Route by topic (``MQTTTopicFilter``) in one consumer instead.
public final class MQTTClient: Sendable {
    /// The configuration the client was made with.
    public let configuration: MQTTConfiguration
    let session: MQTTSession  // internal: tests look at the network thread

    /// Creates a client; nothing happens on the network until ``connect()``.
    public init(configuration: MQTTConfiguration, logger: Logger = Logger(label: "ampel.mqtt")) {
        self.configuration = configuration
        self.session = MQTTSession(configuration: configuration, logger: logger, handler: nil)
    }

    /// Creates a client that hands every received message to `handler` instead of ``messages``.
    ///
    /// For a consumer that already has its own queue (the daemon merges messages with timer
    /// and data events): the message reaches it without a second buffer and task switch.
    /// `handler` runs on the client's network thread, in arrival order, one message at a time;
    /// it must return quickly and must not call the client (hand the message on, e.g. to a
    /// continuation). ``messages`` then stays empty and ends after ``disconnect()``.
    public init(configuration: MQTTConfiguration, logger: Logger = Logger(label: "ampel.mqtt"),
                handler: @escaping @Sendable (MQTTMessage) -> Void) {
        self.configuration = configuration
        self.session = MQTTSession(configuration: configuration, logger: logger, handler: handler)
    }

    deinit {
        session.shutdownFromDeinit()
    }

    /// A task executor for the consumer of ``init(configuration:logger:handler:)``: a job that
    /// a message or an answer resumes runs on the client's network thread, between its reads and
    /// writes, and any other job on Swift's global executor.
    ///
    /// A consumer that prefers it (`withTaskExecutorPreference`), handles each message without
    /// suspending and publishes with ``enqueue(_:acknowledged:)`` works on one thread, as a client
    /// inside libmosquitto's callback would: no thread is woken to take the message, and none
    /// to write the publishes. Its handling delays the client's reads and writes meanwhile, so
    /// it must not block.
    public var taskExecutor: any TaskExecutor { session.loop.executor }

    /// Hands every message received from now on to `handler` instead of ``messages``, as
    /// ``init(configuration:logger:handler:)`` does, for a consumer made after the client.
    /// Set it before ``connect()``: a message received before goes to ``messages``.
    public func deliver(to handler: @escaping @Sendable (MQTTMessage) -> Void) {
        session.deliver(to: handler)
    }

    /// Tells `handler` the topic and reason code of every publish the broker refuses from now
    /// on: a PUBACK (or PUBREC) with a reason code of 0x80 or above, e.g. `0x87` not
    /// authorised by its ACL, whether anybody awaits the publish or not. Called on the network
    /// thread: keep it short.
    ///
    /// > Note: MQTT 3.1.1 has no reason codes on PUBACK: a broker that refuses a publish there
    /// > acknowledges it all the same (mosquitto) or closes the connection, and nothing is reported.
    public func onPublishRefused(_ handler: @escaping @Sendable (_ topic: String, _ reason: Int) -> Void) {
        session.onRefused(handler)
    }

    /// Connects and returns once the broker accepted the connection (CONNACK).
    ///
    /// A failure here is returned, not retried: refused credentials (`.connectionRefused` with
    /// the broker's reason code), an unknown host (`.lookup`), nothing listening (`.system`),
    /// a TLS failure (`.tls`). After success, later losses are retried automatically.
    /// - Throws: ``MQTTError``; ``MQTTError/Code/invalidConfiguration`` for settings that would
    ///   not do what they say (e.g. an MQTT 5 persistent session without session expiry).
    public func connect() async throws(MQTTError) {
        try await session.connect()
    }

    /// Received messages, in arrival order, buffered up to
    /// ``MQTTConfiguration/incomingBufferSize`` (then dropped and counted by the
    /// ``MQTTConfiguration/overflowPolicy``). Ends after ``disconnect()``.
    public var messages: AsyncStream<MQTTMessage> { session.messageStream }

    /// Connection changes: ``MQTTConnectionEvent/connected(sessionPresent:)`` after every
    /// CONNACK, ``MQTTConnectionEvent/disconnected(reason:)`` after every loss. Ends after
    /// ``disconnect()``. Keeps the newest 256 events if nobody reads them.
    public var events: AsyncStream<MQTTConnectionEvent> { session.eventStream }

    /// Subscribes to topic filters and returns once the broker acknowledged (SUBACK), with the
    /// QoS granted per filter. Shared subscriptions (`$share/<group>/<filter>`) are allowed.
    /// The filters are restored after a reconnect that did not keep the session.
    /// - Throws: ``MQTTError/Code/invalidTopic`` for a malformed filter,
    ///   ``MQTTError/Code/noConnection`` while disconnected, ``MQTTError/Code/rejected`` if the
    ///   broker refused a filter (the others stay subscribed).
    @discardableResult
    public func subscribe(_ filters: [(String, MQTTQoS)]) async throws(MQTTError) -> [MQTTQoS] {
        try await session.subscribe(filters)
    }

    /// Subscribes to `filters` and answers, for each in input order, what the broker granted or
    /// why it refused: one request per QoS, where ``subscribe(_:)-([(String,MQTTQoS)])`` throws
    /// at the first refusal. Throws only when the broker did not answer.
    public func subscribeAnswers(_ filters: [(String, MQTTQoS)]) async throws(MQTTError) -> [MQTTSubscriptionAnswer] {
        try await session.subscribeAnswers(filters)
    }

    /// Subscribes to one filter; see ``subscribe(_:)-([(String,MQTTQoS)])``.
    @discardableResult
    public func subscribe(_ filter: String, qos: MQTTQoS = .atLeastOnce) async throws(MQTTError) -> MQTTQoS {
        try await session.subscribe([(filter, qos)])[0]
    }

    /// Removes subscriptions and returns after the broker's UNSUBACK.
    public func unsubscribe(_ filters: [String]) async throws(MQTTError) {
        try await session.unsubscribe(filters)
    }

    /// Publishes a message.
    ///
    /// - QoS 0 returns once libmosquitto took the message; while disconnected it throws
    ///   ``MQTTError/Code/noConnection`` (libmosquitto would drop it silently).
    /// - QoS 1/2 returns when the broker acknowledged (PUBACK/PUBCOMP). While disconnected the
    ///   message is queued and sent after the reconnect; the call waits for that.
    ///   Cancelling the task stops the wait, not the delivery.
    /// - Parameters:
    ///   - messageExpiry: MQTT 5 message expiry: the broker discards the message if it could not
    ///     deliver it within this time. Whole seconds.
    /// - Throws: ``MQTTError``: invalid topic, ``MQTTError/Code/rejected`` (negative PUBACK,
    ///   e.g. not authorised), ``MQTTError/Code/closed`` if the client is disconnected first.
    public func publish(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false, messageExpiry: Duration? = nil
    ) async throws(MQTTError) {
        try await session.publish(OutgoingMessage(topic: topic, payload: payload, qos: qos, retain: retain, expiry: messageExpiry))
    }

    /// ``publish(topic:payload:qos:retain:messageExpiry:)`` for a message as the daemon makes it.
    public func publish(_ message: OutgoingMessage) async throws(MQTTError) {
        try await session.publish(message)
    }

    /// Publishes without waiting for the broker's acknowledgement; messages go out in call order.
    ///
    /// For high-rate producers (the daemon's state and alert publishes): awaiting every PUBACK
    /// would limit them to one broker round trip per message. A QoS 1 message handed over here
    /// is resent by libmosquitto until acknowledged within the session; while disconnected it
    /// waits, in order, and is sent after the reconnect. Broker rejections (negative PUBACK)
    /// are not reported to the caller; use ``publish(topic:payload:qos:retain:messageExpiry:)``
    /// where they matter.
    /// - Parameters:
    ///   - acknowledged: called once with the outcome (`nil`: the broker acknowledged; else why
    ///     not: a negative PUBACK, or the client closed first), on the network thread: it must
    ///     return quickly and must not call the client. A QoS 0 message reports `nil` at once.
    /// - Throws: ``MQTTError``: invalid topic, QoS 0 while disconnected, closed client.
    public func enqueue(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false, messageExpiry: Duration? = nil,
        acknowledged: (@Sendable (MQTTError?) -> Void)? = nil
    ) throws(MQTTError) {
        try enqueue(OutgoingMessage(topic: topic, payload: payload, qos: qos, retain: retain, expiry: messageExpiry),
                    acknowledged: acknowledged)
    }

    /// ``enqueue(topic:payload:qos:retain:messageExpiry:acknowledged:)`` for a message as the
    /// daemon makes it: handed to libmosquitto as it is.
    ///
    /// The daemon's hot path: the session asks its state machine and hands the message to
    /// libmosquitto under its lock (``MQTTSession/enqueue(_:acknowledged:)``).
    public func enqueue(_ message: OutgoingMessage, acknowledged: (@Sendable (MQTTError?) -> Void)? = nil) throws(MQTTError) {
        try session.enqueue(message, acknowledged: acknowledged)
    }

    /// Stops reading from the broker's socket (and so acknowledging its messages) until
    /// ``resumeReading()``: the broker keeps what it has not delivered. For a consumer whose
    /// queue is full, and for a stop that must not take messages it will not handle. The
    /// connection's other work (sending, keep-alive) goes on; the answers to publishes made
    /// meanwhile are read only after the resume.
    public func pauseReading() {
        session.setReading(false)
    }

    /// Reads from the socket again after ``pauseReading()``.
    public func resumeReading() {
        session.setReading(true)
    }

    /// Disconnects cleanly and stops the network thread.
    ///
    /// Sends DISCONNECT (so the broker discards the Last Will), waits for the network thread to
    /// end, fails publishes still waiting for an acknowledgement with ``MQTTError/Code/closed``
    /// and finishes ``messages`` and ``events``. The client cannot connect again; the
    /// libmosquitto handle is freed when the client is released.
    public func disconnect() async {
        await session.disconnect(sendDisconnect: true)
    }

    /// Ends the connection without DISCONNECT, so that the broker publishes the Last Will, and
    /// closes the client as ``disconnect()`` does.
    ///
    /// For a goodbye that could not be confirmed: a client that published its own "offline"
    /// and got no acknowledgement (a frozen or unreachable broker) cannot know it arrived; a
    /// clean DISCONNECT would then make the broker discard the Will, which is the one message
    /// that still says the truth. A frozen broker publishes the Will once it runs again.
    public func abort() async {
        await session.disconnect(sendDisconnect: false)
    }

    /// QoS 1/2 publishes handed over (``publish(topic:payload:qos:retain:messageExpiry:)``,
    /// ``enqueue(topic:payload:qos:retain:messageExpiry:acknowledged:)``) that the broker has
    /// not answered yet: what libmosquitto holds in memory for the broker. A producer that
    /// outruns the broker bounds its memory by waiting on it (``waitForAnswers(atMost:)``).
    /// Publishes held while disconnected count too: they wait for the broker as well. QoS 0
    /// publishes are not counted.
    public var unanswered: Int { session.unanswered }

    /// Returns once at most `target` publishes are unanswered (``unanswered``), or the client is
    /// closed. One waiter at a time: a new call ends the previous call's wait. The answers are
    /// read from the socket: a caller that paused reading (``pauseReading()``) must resume it.
    public func waitForAnswers(atMost target: Int) async {
        await session.waitForAnswers(atMost: target)
    }

    /// Counters since the client was created.
    public var counters: MQTTCounters { session.counters }

    /// The broker of ``MQTTConfiguration/endpoints`` the client is connected to, or was last;
    /// nil before the first connection and once the client is closed.
    public var connectedBroker: MQTTConfiguration.Endpoint? { session.connectedBroker }

    /// The version of the libmosquitto the process runs with, e.g. `2.0.11`.
    public static var libraryVersion: String { MosquittoLibrary.version }
}
