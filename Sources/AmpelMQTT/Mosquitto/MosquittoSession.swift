import CAmpelLinux
import CMosquitto
import Foundation
import Logging
import Synchronization

/// The libmosquitto wall: owns one `struct mosquitto`, its network thread and its callbacks.
///
/// Thread model (see docs/mqtt-client.md for the traps this avoids):
/// - One dedicated thread per client runs connect, the network loop and the reconnect backoff.
///   libmosquitto's own `mosquitto_loop_start` is not used: its reconnect path re-sends the
///   CONNECT without our MQTT 5 session-expiry property, and `mosquitto_connect_async` has no
///   MQTT 5 variant. Our thread calls the blocking `mosquitto_connect_bind_v5` each time, with
///   the properties built once for the handle's lifetime.
/// - Callbacks run on that thread (or, for log lines, on a publishing thread). They only copy
///   data and touch locked Swift state; they never call back into libmosquitto, never set
///   callbacks and never stop the loop.
/// - Swift tasks call publish/subscribe/unsubscribe/disconnect from any thread; with
///   `mosquitto_threaded_set(true)` these only queue a packet, and we wake the network thread
///   if it is asleep (``loopOnce(_:timeoutMilliseconds:_:)`` says why not libmosquitto's way).
final class MosquittoSession: Sendable {
    enum Phase: Sendable {
        case idle
        case connecting
        case connected
        case reconnecting
        case closing
        case closed
    }

    struct State: ~Copyable {
        var phase: Phase = .idle
        /// The `connect()` call waiting for the first CONNACK (or failure).
        var connectWaiter: CheckedContinuation<Result<Bool, MQTTError>, Never>?
        var threadRunning = false
        var stopRequested = false
        /// Set by on_connect: CONNACK accepted in the current attempt.
        var connackAccepted = false
        var sessionPresent = false
        /// Set by on_connect: CONNACK refused in the current attempt.
        var connackRefusal: MQTTError?
        /// Set by on_disconnect: why the connection ended.
        var disconnectReason: Int32?
        var needsResubscribe = false
        /// Last warning/error libmosquitto logged, to explain TLS and socket failures.
        var lastLogError: String?
        /// Filters acknowledged by the broker, in subscription order, to restore after a
        /// reconnect that did not keep the session.
        var subscriptions: [(filter: String, qos: MQTTQoS)] = []
        var everConnected = false
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
    }

    struct OutgoingMessage: Sendable {
        var topic: String
        var payload: [UInt8]
        var qos: MQTTQoS
        var retain: Bool
        var expirySeconds: UInt32?
    }

    struct OfflinePublish {
        /// The publishing task's token (0 for `enqueue`, which nobody cancels).
        var id: UInt64
        var message: OutgoingMessage
        /// Nil once the publishing task stopped waiting (cancelled); still sent.
        var waiter: UnsafeContinuation<AckResult, Never>?
    }

    struct Gate: ~Copyable {
        var open = false
        /// Tasks waiting for the answer to a message id. Kept under the same lock as the
        /// libmosquitto call that hands out the id, so an answer can never arrive before its
        /// waiter is registered, and ids nobody waits for (QoS 0, `enqueue`, re-subscribes)
        /// need no bookkeeping at all: their answers find no waiter and are dropped.
        var acks = AckTable()
        /// The client was closed: nothing is queued any more.
        var closed = false
        var offline: [OfflinePublish] = []
    }

    let handle: MosquittoHandle
    let configuration: MQTTConfiguration
    let logger: Logger
    let connectProperties: MosquittoProperties
    /// A configuration problem found while setting up the handle; thrown by `connect()`.
    let setupError: MQTTError?
    let state = Mutex(State())
    /// Serialises every libmosquitto call that queues a packet (publish, subscribe, disconnect)
    /// against the network thread's connect: libmosquitto 2.0 drops packets queued while
    /// `mosquitto_connect*` resets the connection. Open only between CONNACK and the loss of
    /// the connection; while closed, QoS 1/2 publishes wait in `offline`. It also holds the
    /// ack waiters, which the network thread matches to the answers it collected
    /// (``deliverAnswers(_:)``), between loop steps and never inside a callback.
    /// Lock order: gate, then state; never state, then gate.
    let gate = Mutex(Gate())
    /// Woken by `disconnect()` to cut a reconnect backoff short.
    let wakeup = DispatchSemaphore(value: 0)

    let messageStream: AsyncStream<MQTTMessage>
    /// Set: received messages go here, on the network thread, instead of `messageStream`.
    let handler: (@Sendable (MQTTMessage) -> Void)?
    let messageContinuation: AsyncStream<MQTTMessage>.Continuation
    let eventStream: AsyncStream<MQTTConnectionEvent>
    let eventContinuation: AsyncStream<MQTTConnectionEvent>.Continuation

    /// Tasks waiting in `gate.acks`, plus sends about to register one: raised *before* the
    /// libmosquitto call that produces the answer, lowered when a waiter leaves. While it is 0
    /// no answer can have a waiter, so the acknowledgement callback does not even note it; with
    /// QoS 0 or `enqueue` traffic the network thread and the publishers then never meet on a lock.
    let possibleWaiters = Atomic<Int>(0)
    /// Answers read but not yet handed over, for ``deliverAnswers(_:)``. Only the network
    /// thread touches it; the lock is never contended.
    let answers = Mutex<[(mid: Int32, result: AckResult)]>([])
    /// The network thread's wake-up descriptor (eventfd), and whether that thread is in, or about
    /// to enter, `poll` and needs it to notice a packet queued by another thread.
    let wakeReadFD: Int32
    let wakeWriteFD: Int32
    let networkIdle = Atomic<Bool>(false)
    /// Hands out the tokens by which a cancelled publish or request finds its wait (from 1).
    let nextToken = Atomic<UInt64>(0)
    let sentCount = Atomic<Int>(0)
    let acknowledgedCount = Atomic<Int>(0)
    let receivedCount = Atomic<Int>(0)
    let droppedCount = Atomic<Int>(0)
    let reconnectCount = Atomic<Int>(0)

    init(configuration: MQTTConfiguration, logger: Logger, handler: (@Sendable (MQTTMessage) -> Void)?) {
        MosquittoLibrary.ensureInitialised()
        self.configuration = configuration
        self.logger = logger
        self.handler = handler

        let clientID: String? = configuration.clientID.isEmpty ? nil : configuration.clientID
        // An empty id with a persistent session is invalid for libmosquitto (EINVAL, nil handle);
        // validate() reports it from connect(), so create a clean-start handle meanwhile.
        let cleanStart = configuration.cleanStart || clientID == nil
        guard let pointer = mosquitto_new(clientID, cleanStart, nil) else {
            fatalError("libmosquitto could not allocate a client: out of memory")
        }
        handle = MosquittoHandle(pointer: pointer)

        var properties: OpaquePointer?
        if configuration.protocolVersion == .v5, let expiry = configuration.sessionExpiry, expiry > .zero {
            let seconds = UInt32(clamping: expiry.components.seconds)
            _ = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), seconds)
        }
        connectProperties = MosquittoProperties(pointer: properties)

        let policy: AsyncStream<MQTTMessage>.Continuation.BufferingPolicy =
            switch configuration.overflowPolicy {
            case .dropOldest: .bufferingNewest(max(configuration.incomingBufferSize, 1))
            case .dropNewest: .bufferingOldest(max(configuration.incomingBufferSize, 1))
            }
        (messageStream, messageContinuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: policy)
        (eventStream, eventContinuation) = AsyncStream.makeStream(
            of: MQTTConnectionEvent.self, bufferingPolicy: .bufferingNewest(256))

        var writeFD: Int32 = -1
        wakeReadFD = ampel_wake_create(&writeFD)
        wakeWriteFD = writeFD
        setupError = wakeReadFD < 0
            ? MQTTError(code: .system, message: "cannot create the MQTT network thread's wake-up descriptor: \(String(cString: strerror(errno)))")
            : Self.configure(pointer, configuration)
        mosquitto_user_data_set(pointer, Unmanaged.passUnretained(self).toOpaque())
        installCallbacks()
    }

    deinit {
        mosquitto_destroy(handle.pointer)
        if wakeReadFD >= 0 { ampel_wake_close(wakeReadFD, wakeWriteFD) }
        var properties = connectProperties.pointer
        mosquitto_property_free_all(&properties)
        messageContinuation.finish()
        eventContinuation.finish()
    }

    /// Applies the configuration to a fresh handle; returns the first failure.
    private static func configure(_ mosq: OpaquePointer, _ config: MQTTConfiguration) -> MQTTError? {
        func check(_ rc: Int32, _ what: String) -> MQTTError? {
            rc == MOSQ_ERR_SUCCESS.rawValue ? nil : .mosquitto(rc, what)
        }
        let version = config.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        if let error = check(mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, Int32(version)), "protocol version") {
            return error
        }
        _ = mosquitto_threaded_set(mosq, true)
        // Without TCP_NODELAY a QoS 1 round trip waits for Nagle + delayed ACK (~40 ms).
        _ = mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1)
        if let error = check(
            mosquitto_int_option(mosq, MOSQ_OPT_SEND_MAXIMUM, Int32(clamping: config.maxInflight)), "send maximum")
        {
            return error
        }
        if config.protocolVersion == .v5,
            let error = check(
                mosquitto_int_option(mosq, MOSQ_OPT_RECEIVE_MAXIMUM, Int32(clamping: config.receiveMaximum)),
                "receive maximum")
        {
            return error
        }
        if let username = config.username,
            let error = check(mosquitto_username_pw_set(mosq, username, config.password), "username/password")
        {
            return error
        }
        if let will = config.will {
            let rc = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set(
                    mosq, will.topic, Int32(bytes.count), bytes.baseAddress, Int32(will.qos.rawValue), will.retain)
            }
            if let error = check(rc, "Last Will on '\(will.topic)'") { return error }
        }
        if let tls = config.tls {
            let rc = mosquitto_tls_set(mosq, tls.caFile, nil, tls.certFile, tls.keyFile, nil)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                return MQTTError(
                    code: .tls,
                    message: "TLS set-up failed (CA file '\(tls.caFile)'"
                        + (tls.certFile.map { ", certificate '\($0)'" } ?? "")
                        + "): \(String(cString: mosquitto_strerror(rc))); check that the files exist and are readable")
            }
            _ = mosquitto_tls_opts_set(mosq, tls.verifyPeer ? 1 : 0, nil, nil)
            _ = mosquitto_tls_insecure_set(mosq, !tls.verifyPeer)
        }
        return nil
    }

    // MARK: - Callbacks (network thread; copy, record, never call libmosquitto)

    private static func session(_ userdata: UnsafeMutableRawPointer?) -> MosquittoSession? {
        guard let userdata else { return nil }
        return Unmanaged<MosquittoSession>.fromOpaque(userdata).takeUnretainedValue()
    }

    private func installCallbacks() {
        let mosq = handle.pointer
        mosquitto_connect_v5_callback_set(mosq) { _, userdata, reason, flags, _ in
            MosquittoSession.session(userdata)?.onConnect(reason: reason, flags: flags)
        }
        mosquitto_disconnect_v5_callback_set(mosq) { _, userdata, reason, _ in
            MosquittoSession.session(userdata)?.onDisconnect(reason: reason)
        }
        mosquitto_publish_v5_callback_set(mosq) { _, userdata, mid, reason, _ in
            MosquittoSession.session(userdata)?.onAck(mid: mid, .published(reason: reason))
        }
        mosquitto_subscribe_v5_callback_set(mosq) { _, userdata, mid, count, granted, _ in
            let codes = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(count, 0)))) } ?? []
            MosquittoSession.session(userdata)?.onAck(mid: mid, .subscribed(granted: codes))
        }
        mosquitto_unsubscribe_v5_callback_set(mosq) { _, userdata, mid, _ in
            MosquittoSession.session(userdata)?.onAck(mid: mid, .unsubscribed)
        }
        mosquitto_message_v5_callback_set(mosq) { _, userdata, message, _ in
            guard let message, let session = MosquittoSession.session(userdata) else { return }
            session.onMessage(message.pointee)
        }
        setLogCallback(enabled: true)
    }

    /// Log lines are only needed to explain a failing connect (TLS errors are reported there);
    /// while connected, formatting one per packet would cost throughput, so the network thread
    /// switches them off after CONNACK (never from inside a callback).
    private func setLogCallback(enabled: Bool) {
        if enabled {
            mosquitto_log_callback_set(handle.pointer) { _, userdata, level, text in
                guard let text, level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0,
                    let session = MosquittoSession.session(userdata)
                else { return }
                let line = String(cString: text)
                session.state.withLock { $0.lastLogError = line }
            }
        } else {
            mosquitto_log_callback_set(handle.pointer, nil)
        }
    }

    private func onConnect(reason: Int32, flags: Int32) {
        let isV5 = configuration.protocolVersion == .v5
        state.withLock { state in
            if reason == 0 {
                state.connackAccepted = true
                state.sessionPresent = flags & 1 != 0
                if !state.sessionPresent && !state.subscriptions.isEmpty { state.needsResubscribe = true }
            } else {
                let text = String(cString: isV5 ? mosquitto_reason_string(reason) : mosquitto_connack_string(reason))
                state.connackRefusal = MQTTError(
                    code: .connectionRefused, reasonCode: Int(reason),
                    message: "connection refused by broker \(configuration.host):\(configuration.port): \(text)")
            }
        }
    }

    private func onDisconnect(reason: Int32) {
        state.withLock { $0.disconnectReason = reason }
    }

    /// Notes an answer; ``deliverAnswers(_:)`` hands it to its waiter, in a batch with others
    /// (see ``loopOnce(_:timeoutMilliseconds:_:)``).
    private func onAck(mid: Int32, _ result: AckResult) {
        guard possibleWaiters.load(ordering: .sequentiallyConsistent) > 0 else { return }
        answers.withLock { $0.append((mid, result)) }
    }

    /// Resumes the tasks waiting for the answers collected so far (network thread).
    ///
    /// One gate lock for all of them instead of one per PUBACK, so the publishing tasks and the
    /// network thread meet on that lock once per batch; and the resumed tasks are enqueued in
    /// one burst, which wakes a pool thread once for the lot rather than once per message.
    /// `spare` is the network thread's empty buffer, swapped in to keep the capacity.
    private func deliverAnswers(_ spare: inout [(mid: Int32, result: AckResult)]) {
        answers.withLock { swap(&$0, &spare) }
        if spare.isEmpty { return }
        let ready: [(UnsafeContinuation<AckResult, Never>, AckResult)] = gate.withLock { gate in
            spare.compactMap { answer in gate.acks.answer(mid: answer.mid).map { ($0, answer.result) } }
        }
        spare.removeAll(keepingCapacity: true)
        if ready.isEmpty { return }
        possibleWaiters.subtract(ready.count, ordering: .sequentiallyConsistent)
        for (continuation, result) in ready { continuation.resume(returning: result) }
    }

    private func onMessage(_ message: mosquitto_message) {
        let topic = String(cString: message.topic)
        let payload = [UInt8](UnsafeRawBufferPointer(start: message.payload, count: Int(max(message.payloadlen, 0))))
        let qos = MQTTQoS(rawValue: Int(message.qos)) ?? .atMostOnce
        receivedCount.add(1, ordering: .relaxed)
        let received = MQTTMessage(topic: topic, payload: payload, qos: qos, retain: message.retain)
        if let handler {
            handler(received)
            return
        }
        let result = messageContinuation.yield(received)
        if case .dropped = result { droppedCount.add(1, ordering: .relaxed) }
    }

    // MARK: - Operations called by MQTTClient (any thread)

    func connect() async throws(MQTTError) {
        if let setupError { throw setupError }
        try configuration.validate()
        let result: Result<Bool, MQTTError> = await withCheckedContinuation { continuation in
            let start: Bool = state.withLock { state in
                switch state.phase {
                case .idle:
                    state.phase = .connecting
                    state.connectWaiter = continuation
                    state.stopRequested = false
                    state.threadRunning = true
                    return true
                case .closed, .closing:
                    continuation.resume(returning: .failure(Self.closedError))
                case .connecting, .connected, .reconnecting:
                    continuation.resume(
                        returning: .failure(MQTTError(code: .alreadyConnected, message: "connect() called while already connected or connecting")))
                }
                return false
            }
            if start {
                let name = "mqtt-" + String(decoding: configuration.clientID.utf8.prefix(10), as: UTF8.self)
                let thread = Thread { [self] in
                    ampel_thread_set_name(name)
                    self.applySchedulingPolicy()
                    self.networkThreadMain()
                }
                thread.start()
            }
        }
        _ = try result.get()
    }

    static let closedError = MQTTError(code: .closed, message: "the MQTT client was disconnected and cannot be used again")

    func publish(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, messageExpiry: Duration?) async throws(MQTTError) {
        // Hot path: no checks of our own before the call; libmosquitto validates the topic, and
        // the readable reason is worked out only when it refuses.
        let message = try outgoing(topic: topic, payload: payload, qos: qos, retain: retain, messageExpiry: messageExpiry)
        if qos == .atMostOnce {
            // libmosquitto drops a QoS 0 publish while disconnected (MOSQ_ERR_NO_CONN): say so.
            let rc: Int32 = gate.withLock { gate in
                gate.open ? send(message).rc : MOSQ_ERR_NO_CONN.rawValue
            }
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                throw publishFailure(rc, topic: topic, qos: qos)
            }
            sentCount.add(1, ordering: .relaxed)
            return
        }
        if let error = MQTTTopicFilter.validateTopicName(topic) { throw error }  // before it may wait offline
        // Drawn before anything can be cancelled: the cancellation handler finds the wait by it.
        let token = nextToken.add(1, ordering: .relaxed).newValue
        let result: AckResult = await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<AckResult, Never>) in
                enum Outcome { case sent, sentCancelled(Int32), queued, queuedCancelled, failed(Int32), closed }
                let outcome: Outcome = gate.withLock { gate in
                    if gate.closed { return .closed }
                    guard gate.open else {
                        // Not connected: keep it here until the next CONNACK. Handing it to
                        // libmosquitto now could race with the connect on the network thread.
                        let cancelled = Task.isCancelled
                        gate.offline.append(OfflinePublish(id: token, message: message, waiter: cancelled ? nil : continuation))
                        return cancelled ? .queuedCancelled : .queued
                    }
                    possibleWaiters.add(1, ordering: .sequentiallyConsistent)
                    let (rc, mid) = send(message)
                    // MOSQ_ERR_NO_CONN: the connection just broke, but libmosquitto keeps the
                    // message queued and sends it after the reconnect.
                    if rc == MOSQ_ERR_SUCCESS.rawValue || rc == MOSQ_ERR_NO_CONN.rawValue {
                        // Checked under the gate, which the cancellation handler takes too: either
                        // it ran before (and this sees the flag) or it finds the waiter.
                        if !Task.isCancelled {
                            gate.acks.wait(mid: mid, token: token, continuation)
                            return .sent
                        }
                        possibleWaiters.subtract(1, ordering: .sequentiallyConsistent)
                        return .sentCancelled(mid)
                    }
                    possibleWaiters.subtract(1, ordering: .sequentiallyConsistent)
                    return .failed(rc)
                }
                switch outcome {
                case .queued:
                    sentCount.add(1, ordering: .relaxed)
                case .closed:
                    continuation.resume(returning: .failed(Self.closedError))
                case .queuedCancelled:
                    sentCount.add(1, ordering: .relaxed)
                    continuation.resume(returning: .failed(Self.cancelledError(0)))
                case .failed(let rc):
                    continuation.resume(returning: .failed(publishFailure(rc, topic: topic, qos: qos)))
                case .sent:
                    sentCount.add(1, ordering: .relaxed)
                case .sentCancelled(let mid):
                    sentCount.add(1, ordering: .relaxed)
                    continuation.resume(returning: .failed(Self.cancelledError(mid)))
                }
            }
        } onCancel: {
            cancelWait(token)
        }
        switch result {
        case .published(let reason) where reason < 0x80:
            acknowledgedCount.add(1, ordering: .relaxed)
        case .published(let reason):
            throw MQTTError(
                code: .rejected, reasonCode: Int(reason),
                message: "broker rejected publish to '\(topic)': \(String(cString: mosquitto_reason_string(reason)))")
        case .failed(let error):
            throw error
        case .subscribed, .unsubscribed:
            throw MQTTError(code: .protocolError, message: "publish to '\(topic)' answered by a (un)subscribe acknowledgement")
        }
    }

    /// Hands a publish to the connection in call order and returns without waiting for PUBACK.
    ///
    /// QoS 1 delivery is then libmosquitto's: it resends until the broker acknowledges, within
    /// the session. While the gate is closed the message waits in `offline`, in order, like an
    /// awaited publish whose task stopped waiting.
    func enqueue(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, messageExpiry: Duration?) throws(MQTTError) {
        let message = try outgoing(topic: topic, payload: payload, qos: qos, retain: retain, messageExpiry: messageExpiry)
        if let error = MQTTTopicFilter.validateTopicName(topic) { throw error }
        enum Outcome { case sent(Int32), queued, closed, refusedQoS0 }
        let outcome: Outcome = gate.withLock { gate in
            if gate.closed { return .closed }
            guard gate.open else {
                if qos == .atMostOnce { return .refusedQoS0 }
                gate.offline.append(OfflinePublish(id: 0, message: message, waiter: nil))
                return .queued
            }
            return .sent(send(message).rc)
        }
        switch outcome {
        case .closed:
            throw Self.closedError
        case .refusedQoS0:
            throw publishFailure(MOSQ_ERR_NO_CONN.rawValue, topic: topic, qos: qos)
        case .queued:
            sentCount.add(1, ordering: .relaxed)
        case .sent(let rc):
            guard rc == MOSQ_ERR_SUCCESS.rawValue || (rc == MOSQ_ERR_NO_CONN.rawValue && qos != .atMostOnce) else {
                throw publishFailure(rc, topic: topic, qos: qos)
            }
            sentCount.add(1, ordering: .relaxed)
        }
    }

    /// The message to hand to libmosquitto; message expiry needs MQTT 5.
    private func outgoing(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, messageExpiry: Duration?) throws(MQTTError) -> OutgoingMessage {
        var expirySeconds: UInt32?
        if let messageExpiry {
            guard configuration.protocolVersion == .v5 else {
                throw MQTTError(code: .notSupported, message: "message expiry needs MQTT 5 (protocolVersion is 3.1.1)")
            }
            expirySeconds = UInt32(clamping: max(messageExpiry.components.seconds, 1))
        }
        return OutgoingMessage(topic: topic, payload: payload, qos: qos, retain: retain, expirySeconds: expirySeconds)
    }

    /// Why libmosquitto refused a publish, in words: closed client, bad topic, no connection.
    private func publishFailure(_ rc: Int32, topic: String, qos: MQTTQoS) -> MQTTError {
        if state.withLock({ $0.phase == .closed || $0.phase == .closing }) { return Self.closedError }
        if rc == MOSQ_ERR_INVAL.rawValue || rc == MOSQ_ERR_MALFORMED_UTF8.rawValue {
            return MQTTTopicFilter.validateTopicName(topic)
                ?? MQTTError(code: .invalidTopic, message: "invalid topic '\(topic)': not accepted by libmosquitto (invalid UTF-8?)")
        }
        if rc == MOSQ_ERR_NO_CONN.rawValue && qos == .atMostOnce {
            return .mosquitto(rc, "publish (QoS 0) to '\(topic)' not sent (libmosquitto would drop it)")
        }
        return .mosquitto(rc, "publish to '\(topic)' rejected")
    }

    /// Hands one message to libmosquitto. Only called with the gate held.
    private func send(_ message: OutgoingMessage) -> (rc: Int32, mid: Int32) {
        var properties: OpaquePointer?
        if let seconds = message.expirySeconds {
            _ = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), seconds)
        }
        defer { if properties != nil { mosquitto_property_free_all(&properties) } }
        var mid: Int32 = 0
        // `withCString`, not the implicit String-to-pointer argument conversion: that one copies
        // the topic into a new array on every call; this lends a native string's own storage.
        let rc = message.topic.withCString { topic in
            message.payload.withUnsafeBytes { bytes in
                mosquitto_publish_v5(
                    handle.pointer, &mid, topic, Int32(bytes.count), bytes.baseAddress, Int32(message.qos.rawValue),
                    message.retain, properties)
            }
        }
        wakeNetworkThread()
        return (rc, mid)
    }

    private static func cancelledError(_ mid: Int32) -> MQTTError {
        MQTTError(code: .cancelled, message: "stopped waiting for the acknowledgement of message \(mid); it may still be delivered")
    }

    /// The task with `token` was cancelled: stop its wait, wherever it is (offline or sent).
    /// Nothing is found if the answer already came, or if the task has not registered yet (it
    /// checks `Task.isCancelled` under the gate itself).
    private func cancelWait(_ token: UInt64) {
        enum Found { case queued(UnsafeContinuation<AckResult, Never>), sent(Int32, UnsafeContinuation<AckResult, Never>) }
        let found: Found? = gate.withLock { gate in
            if let index = gate.offline.firstIndex(where: { $0.id == token }), let waiter = gate.offline[index].waiter {
                gate.offline[index].waiter = nil
                return .queued(waiter)
            }
            return gate.acks.cancel(token: token).map { .sent($0.mid, $0.continuation) }
        }
        switch found {
        case .queued(let waiter):
            waiter.resume(returning: .failed(Self.cancelledError(0)))
        case .sent(let mid, let continuation):
            possibleWaiters.subtract(1, ordering: .sequentiallyConsistent)
            continuation.resume(returning: .failed(Self.cancelledError(mid)))
        case nil:
            break
        }
    }

    func subscribe(_ filters: [(String, MQTTQoS)]) async throws(MQTTError) -> [MQTTQoS] {
        if filters.isEmpty { return [] }
        for (filter, _) in filters { _ = try MQTTTopicFilter(filter) }
        try ensureUsable()
        // One SUBSCRIBE per QoS (subscribe_multiple takes a single QoS), answers in input order.
        var granted = [MQTTQoS?](repeating: nil, count: filters.count)
        var failure: MQTTError?
        for qos in MQTTQoS.allCases {
            let indices = filters.indices.filter { filters[$0].1 == qos }
            if indices.isEmpty { continue }
            let names = indices.map { filters[$0].0 }
            switch await request("subscribe to \(names)", { sendSubscribeLocked(names, qos: qos) }) {
            case .subscribed(let codes):
                for (position, index) in indices.enumerated() {
                    let code = position < codes.count ? codes[position] : 0x80
                    if let qos = MQTTQoS(rawValue: Int(code)) {
                        granted[index] = qos
                    } else if failure == nil {
                        failure = MQTTError(
                            code: .rejected, reasonCode: Int(code),
                            message: "broker refused subscription to '\(filters[index].0)': \(String(cString: mosquitto_reason_string(code)))")
                    }
                }
            case .failed(let error):
                if failure == nil { failure = error }
            case .published, .unsubscribed:
                if failure == nil { failure = MQTTError(code: .protocolError, message: "subscribe answered by a wrong acknowledgement") }
            }
        }
        state.withLock { state in
            for (index, qos) in granted.enumerated() {
                guard qos != nil else { continue }
                let filter = filters[index]
                state.subscriptions.removeAll { $0.filter == filter.0 }
                state.subscriptions.append((filter.0, filter.1))
            }
        }
        if let failure { throw failure }
        return granted.map { $0 ?? .atMostOnce }
    }

    func unsubscribe(_ filters: [String]) async throws(MQTTError) {
        if filters.isEmpty { return }
        for filter in filters { _ = try MQTTTopicFilter(filter) }
        try ensureUsable()
        state.withLock { state in state.subscriptions.removeAll { filters.contains($0.filter) } }
        let answer = await request("unsubscribe from \(filters)") {
            var mid: Int32 = 0
            let rc = withCStrings(filters) { pointers, count in
                mosquitto_unsubscribe_multiple(handle.pointer, &mid, count, pointers, nil)
            }
            wakeNetworkThread()
            return (rc, mid)
        }
        if case .failed(let error) = answer { throw error }
    }

    private func ensureUsable() throws(MQTTError) {
        let phase = state.withLock { $0.phase }
        switch phase {
        case .closed, .closing: throw Self.closedError
        case .connected: return
        case .idle, .connecting, .reconnecting:
            throw MQTTError(code: .noConnection, message: "not connected to \(configuration.host):\(configuration.port)")
        }
    }

    private func sendSubscribeLocked(_ filters: [String], qos: MQTTQoS) -> (rc: Int32, mid: Int32) {
        var mid: Int32 = 0
        let rc = withCStrings(filters) { pointers, count in
            mosquitto_subscribe_multiple(handle.pointer, &mid, count, pointers, Int32(qos.rawValue), 0, nil)
        }
        wakeNetworkThread()
        return (rc, mid)
    }

    private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>, Int32) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        return copies.withUnsafeBufferPointer { buffer in body(buffer.baseAddress!, Int32(buffer.count)) }
    }

    /// Sends a packet that the broker acknowledges (SUBSCRIBE, UNSUBSCRIBE) and waits for the
    /// answer. The waiter is registered under the gate together with the send, so the answer
    /// cannot come first. Cancellation stops the wait (the packet may still go out).
    private func request(_ what: String, _ send: () -> (rc: Int32, mid: Int32)) async -> AckResult {
        let token = nextToken.add(1, ordering: .relaxed).newValue
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<AckResult, Never>) in
                let immediate: AckResult? = gate.withLock { gate in
                    if gate.closed { return .failed(Self.closedError) }
                    guard gate.open else { return .failed(.mosquitto(MOSQ_ERR_NO_CONN.rawValue, what)) }
                    possibleWaiters.add(1, ordering: .sequentiallyConsistent)
                    let (rc, mid) = send()
                    guard rc == MOSQ_ERR_SUCCESS.rawValue, !Task.isCancelled else {
                        possibleWaiters.subtract(1, ordering: .sequentiallyConsistent)
                        return .failed(rc == MOSQ_ERR_SUCCESS.rawValue ? Self.cancelledError(mid) : .mosquitto(rc, what))
                    }
                    gate.acks.wait(mid: mid, token: token, continuation)
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            cancelWait(token)
        }
    }

    /// Clean shutdown: DISCONNECT (so the broker discards the Will), stop the thread, fail waiters.
    func disconnect() async {
        let (wasRunning, alreadyClosed): (Bool, Bool) = state.withLock { state in
            if state.phase == .closed { return (false, true) }
            state.stopRequested = true
            if state.phase != .closing { state.phase = .closing }
            return (state.threadRunning, false)
        }
        if alreadyClosed { return }
        if wasRunning {
            sendDisconnect()
            wakeup.signal()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state in
                    if !state.threadRunning { return true }
                    state.exitWaiters.append(continuation)
                    return false
                }
                if done { continuation.resume() }
            }
        }
        finishClosed()
    }

    /// Called when the owning MQTTClient goes away without `disconnect()`: same steps, without
    /// waiting. The thread keeps the session alive until it has exited.
    func shutdownFromDeinit() {
        let wasRunning: Bool = state.withLock { state in
            if state.phase == .closed { return false }
            state.stopRequested = true
            state.phase = .closing
            return state.threadRunning
        }
        if wasRunning {
            sendDisconnect()
            wakeup.signal()
        } else {
            finishClosed()
        }
    }

    /// DISCONNECT if connected; otherwise the network thread sends it after its connect call.
    private func sendDisconnect() {
        gate.withLock { gate in
            if gate.open {
                _ = mosquitto_disconnect_v5(handle.pointer, Int32(MQTT_RC_NORMAL_DISCONNECTION.rawValue), nil)
                wakeNetworkThread()
            }
        }
    }

    private func finishClosed() {
        let waiters: [UnsafeContinuation<AckResult, Never>] = gate.withLock { gate in
            gate.open = false
            gate.closed = true
            let answered = gate.acks.takeAll()
            possibleWaiters.subtract(answered.count, ordering: .sequentiallyConsistent)
            let waiters = gate.offline.compactMap(\.waiter) + answered
            gate.offline = []
            return waiters
        }
        state.withLock { $0.phase = .closed }
        for waiter in waiters { waiter.resume(returning: .failed(Self.closedError)) }
        messageContinuation.finish()
        eventContinuation.finish()
    }

    var counters: MQTTCounters {
        MQTTCounters(
            sent: sentCount.load(ordering: .relaxed),
            acknowledged: acknowledgedCount.load(ordering: .relaxed),
            received: receivedCount.load(ordering: .relaxed),
            droppedOnOverflow: droppedCount.load(ordering: .relaxed),
            reconnects: reconnectCount.load(ordering: .relaxed))
    }

    // MARK: - Network thread

    /// Puts the network thread in the configured scheduling class (on the thread itself).
    ///
    /// `.batch` (SCHED_BATCH on Linux): a wake-up of this thread no longer preempts the thread
    /// that caused it. Without it, a publisher that queues a packet while the network thread
    /// sleeps wakes it, and on a busy machine the woken thread takes the publisher's CPU at
    /// once: measured 19,500 such preemptions while handing over 300,000 QoS 0 messages on two
    /// cores, which made the Swift client's hand-off 0.7x the C client's (whose network thread
    /// never sleeps under load; see docs/mqtt-client.md). A woken batch thread still runs at once
    /// on an idle CPU, and otherwise at the next tick or when the running thread blocks.
    private func applySchedulingPolicy() {
        guard configuration.networkThreadPolicy == .batch else { return }
        if ampel_thread_use_batch_class() != 0 {
            logger.debug("MQTT network thread stays in the normal scheduling class", metadata: ["error": "\(String(cString: strerror(errno)))"])
        }
    }

    private func networkThreadMain() {
        let backoff = MQTTBackoff(minimum: configuration.reconnectMinDelay, maximum: configuration.reconnectMaxDelay)
        var failedAttempts = 0
        while !state.withLock({ $0.stopRequested }) {
            let error = runOneConnection()
            let (wasConnected, firstWaiter, stop) = state.withLock { state in
                let wasConnected = state.connackAccepted
                let waiter = state.connectWaiter
                if !state.everConnected { state.connectWaiter = nil }
                if state.phase == .connected || state.phase == .connecting && state.everConnected {
                    state.phase = .reconnecting
                }
                return (wasConnected, state.everConnected ? nil : waiter, state.stopRequested)
            }
            if wasConnected {
                logger.notice("MQTT connection lost", metadata: ["broker": "\(configuration.host):\(configuration.port)", "reason": "\(error.message)"])
                eventContinuation.yield(.disconnected(reason: stop ? Self.requestedDisconnect : error))
                failedAttempts = 0
            }
            if let firstWaiter {
                // The first connect failed: report it and stop; connect() may be called again.
                state.withLock { state in
                    if state.phase == .connecting { state.phase = .idle }
                }
                firstWaiter.resume(returning: .failure(stop ? Self.closedError : error))
                break
            }
            if stop { break }
            failedAttempts += 1
            let delay = backoff.delay(attempt: failedAttempts, jitter: Double.random(in: 0.5...1.0))
            logger.debug("MQTT reconnecting", metadata: ["attempt": "\(failedAttempts)", "delay": "\(delay)"])
            let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
            _ = wakeup.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds)))
        }
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.threadRunning = false
            let waiters = state.exitWaiters
            state.exitWaiters = []
            return waiters
        }
        let closing = state.withLock { $0.phase == .closing }
        if closing && waiters.isEmpty { finishClosed() }  // released without disconnect()
        for waiter in waiters { waiter.resume() }
    }

    /// One iteration of the network loop: what `mosquitto_loop(mosq, timeout, 1)` does, with our
    /// own wake-up instead of libmosquitto's.
    ///
    /// libmosquitto writes a byte into an internal socket pair for every packet any thread
    /// queues, and `mosquitto_loop` selects on it and reads back one byte per iteration. Under
    /// load that pair never empties, so its network thread spins through `select` without ever
    /// sleeping (the C client in Benchmarks/mqtt does so), and every byte written while it does
    /// sleep costs the publisher a kernel wake-up. Here the pair is left alone (once full, its
    /// writes fail at once); the thread polls the socket and an eventfd that publishers signal
    /// only when it is idle (``wakeNetworkThread()``), drains every wake-up at once, and then
    /// does the same read, write and keep-alive steps as `mosquitto_loop`, through the same
    /// public calls (`mosquitto_loop_read`, `_write`, `_misc`), which also handle TLS.
    ///
    /// The idle flag is raised before the last look at the outgoing queue; a publisher queues
    /// first and then reads the flag, both with a full fence between, so either this thread
    /// sees the packet (and polls for writing) or the publisher sees the flag (and wakes it).
    ///
    /// Acknowledgements read here are handed to their waiting tasks (``deliverAnswers(_:)``) in
    /// batches: when ``answerBatch`` have come together, and whenever nothing more is ready
    /// to read or write, before the thread sleeps. Resuming a task wakes a sleeping pool thread
    /// (a futex call on each side, about 10 µs of CPU together); one wake-up then serves the
    /// whole batch, while a lone publish still gets its answer without delay.
    private func loopOnce(
        _ mosq: OpaquePointer, timeoutMilliseconds: Int32, _ spare: inout [(mid: Int32, result: AckResult)]
    ) -> Int32 {
        let socket = mosquitto_socket(mosq)
        guard socket >= 0 else { return MOSQ_ERR_NO_CONN.rawValue }
        var readable: Int32 = 0
        var count: Int32
        if answers.withLock({ !$0.isEmpty }) {
            // Answers are waiting: hand them over now unless there is more to read or write.
            count = poll(mosq, socket, timeoutMilliseconds: 0, &readable)
            if count == 0 {
                deliverAnswers(&spare)
                count = poll(mosq, socket, timeoutMilliseconds: timeoutMilliseconds, &readable)
            }
        } else {
            count = poll(mosq, socket, timeoutMilliseconds: timeoutMilliseconds, &readable)
        }
        if count < 0 {
            return errno == EINTR ? MOSQ_ERR_SUCCESS.rawValue : MOSQ_ERR_ERRNO.rawValue
        }
        if readable != 0 {
            let rc = mosquitto_loop_read(mosq, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue || mosquitto_socket(mosq) < 0 { return rc }
            if answers.withLock({ $0.count }) >= Self.answerBatch { deliverAnswers(&spare) }
        }
        // Whatever is queued now (by other threads while this one polled, or by the read above:
        // PUBACKs, the next messages the send maximum lets out) goes out; a full socket buffer
        // keeps the rest for the next iteration.
        if mosquitto_want_write(mosq) {
            let rc = mosquitto_loop_write(mosq, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue || mosquitto_socket(mosq) < 0 { return rc }
        }
        return mosquitto_loop_misc(mosq)
    }

    /// See ``loopOnce(_:timeoutMilliseconds:_:)``.
    static let answerBatch = 64

    /// Waits for the socket (readable; writable too if a packet is queued) or a wake-up. A wait
    /// that may block raises the idle flag first and takes the last look at the outgoing queue
    /// after it, so that a packet queued from now on comes with a wake-up.
    private func poll(_ mosq: OpaquePointer, _ socket: Int32, timeoutMilliseconds: Int32, _ readable: inout Int32) -> Int32 {
        guard timeoutMilliseconds > 0 else {
            return ampel_wake_poll(socket, mosquitto_want_write(mosq) ? 1 : 0, wakeReadFD, 0, &readable)
        }
        networkIdle.store(true, ordering: .sequentiallyConsistent)
        defer { networkIdle.store(false, ordering: .sequentiallyConsistent) }
        return ampel_wake_poll(socket, mosquitto_want_write(mosq) ? 1 : 0, wakeReadFD, timeoutMilliseconds, &readable)
    }

    /// Called after queueing a packet from any thread: wakes the network thread if it sleeps.
    @inline(__always)
    private func wakeNetworkThread() {
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        if networkIdle.load(ordering: .relaxed), networkIdle.exchange(false, ordering: .sequentiallyConsistent) {
            ampel_wake_signal(wakeWriteFD)
        }
    }

    static let requestedDisconnect = MQTTError(code: .success, message: "disconnected by the client")

    /// One TCP/TLS connection from connect to loss. Returns why it ended.
    private func runOneConnection() -> MQTTError {
        state.withLock { state in
            state.connackAccepted = false
            state.connackRefusal = nil
            state.disconnectReason = nil
            state.lastLogError = nil
        }
        gate.withLock { $0.open = false }
        setLogCallback(enabled: true)
        let mosq = handle.pointer
        let keepAlive = Int32(clamping: configuration.keepAlive.components.seconds)
        let rc: Int32
        errno = 0
        if configuration.protocolVersion == .v5 {
            rc = mosquitto_connect_bind_v5(mosq, configuration.host, Int32(configuration.port), keepAlive, nil, connectProperties.pointer)
        } else {
            rc = mosquitto_connect_bind(mosq, configuration.host, Int32(configuration.port), keepAlive, nil)
        }
        let connectErrno = errno
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            return connectError(rc, errnoValue: connectErrno)
        }
        var loopRC: Int32 = MOSQ_ERR_SUCCESS.rawValue
        var announced = false
        var stopDeadline: ContinuousClock.Instant?
        var spare: [(mid: Int32, result: AckResult)] = []
        defer { deliverAnswers(&spare) }
        while loopRC == MOSQ_ERR_SUCCESS.rawValue {
            loopRC = loopOnce(mosq, timeoutMilliseconds: 1000, &spare)
            let (accepted, stop) = state.withLock { ($0.connackAccepted, $0.stopRequested) }
            if accepted && !announced {
                announced = true
                announceConnected()
            }
            if stop {
                // disconnect() queued a DISCONNECT; give the loop a moment to write it.
                let now = ContinuousClock.now
                if stopDeadline == nil {
                    stopDeadline = now + .seconds(2)
                    _ = mosquitto_disconnect_v5(mosq, Int32(MQTT_RC_NORMAL_DISCONNECTION.rawValue), nil)
                }
                if let deadline = stopDeadline, now > deadline { break }
            }
        }
        gate.withLock { $0.open = false }
        let (refusal, reason, logLine, stop) = state.withLock {
            ($0.connackRefusal, $0.disconnectReason, $0.lastLogError, $0.stopRequested)
        }
        if let refusal { return refusal }
        if stop { return Self.requestedDisconnect }
        var message = "connection to \(configuration.host):\(configuration.port) ended: \(String(cString: mosquitto_strerror(loopRC)))"
        if let reason, reason != 0, configuration.protocolVersion == .v5, reason >= 0x80 {
            message += " (broker: \(String(cString: mosquitto_reason_string(reason))))"
        }
        if let logLine { message += " (\(logLine))" }
        let code = loopRC == MOSQ_ERR_SUCCESS.rawValue ? MQTTError.Code.connectionLost : MQTTError.Code(rawValue: loopRC)
        return MQTTError(code: code, reasonCode: reason.map(Int.init), message: message)
    }

    private func announceConnected() {
        setLogCallback(enabled: false)
        openGate()
        let (first, sessionPresent, waiter): (Bool, Bool, CheckedContinuation<Result<Bool, MQTTError>, Never>?) =
            state.withLock { state in
                let first = !state.everConnected
                state.everConnected = true
                if state.phase != .closing { state.phase = .connected }
                let waiter = state.connectWaiter
                state.connectWaiter = nil
                return (first, state.sessionPresent, waiter)
            }
        if !first { reconnectCount.add(1, ordering: .relaxed) }
        logger.info(
            first ? "MQTT connected" : "MQTT reconnected",
            metadata: ["broker": "\(configuration.host):\(configuration.port)", "sessionPresent": "\(sessionPresent)"])
        eventContinuation.yield(.connected(sessionPresent: sessionPresent))
        waiter?.resume(returning: .success(sessionPresent))
    }

    /// After CONNACK (network thread, between loop iterations, never inside a callback):
    /// re-subscribe if the session was not kept, send what was published while offline, in
    /// order, and let publishers call libmosquitto directly again.
    private func openGate() {
        let resubscribe: [(filter: String, qos: MQTTQoS)] = state.withLock { state in
            defer { state.needsResubscribe = false }
            return state.needsResubscribe ? state.subscriptions : []
        }
        var failed: [(UnsafeContinuation<AckResult, Never>, MQTTError)] = []
        gate.withLock { gate in
            restoreSubscriptions(resubscribe)
            for entry in gate.offline {
                if entry.waiter != nil { possibleWaiters.add(1, ordering: .sequentiallyConsistent) }
                let (rc, mid) = send(entry.message)
                if rc == MOSQ_ERR_SUCCESS.rawValue || rc == MOSQ_ERR_NO_CONN.rawValue {
                    if let waiter = entry.waiter { gate.acks.wait(mid: mid, token: entry.id, waiter) }
                } else if let waiter = entry.waiter {
                    possibleWaiters.subtract(1, ordering: .sequentiallyConsistent)
                    failed.append((waiter, .mosquitto(rc, "publish to '\(entry.message.topic)' rejected")))
                }
            }
            gate.offline = []
            gate.open = true
        }
        for (waiter, error) in failed { waiter.resume(returning: .failed(error)) }
    }

    /// Re-subscribes after a reconnect that did not keep the session. Called with the gate held.
    private func restoreSubscriptions(_ subscriptions: [(filter: String, qos: MQTTQoS)]) {
        for qos in MQTTQoS.allCases {
            let filters = subscriptions.filter { $0.qos == qos }.map(\.filter)
            if filters.isEmpty { continue }
            // Its SUBACK finds no waiter and is dropped.
            let rc = sendSubscribeLocked(filters, qos: qos).rc
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                logger.info("MQTT re-subscribed", metadata: ["filters": "\(filters)"])
            } else {
                logger.error("MQTT re-subscribe failed", metadata: ["filters": "\(filters)", "error": "\(String(cString: mosquitto_strerror(rc)))"])
            }
        }
    }

    private func connectError(_ rc: Int32, errnoValue: Int32) -> MQTTError {
        let target = "\(configuration.host):\(configuration.port)"
        let logLine = state.withLock { $0.lastLogError }
        switch rc {
        case MOSQ_ERR_ERRNO.rawValue:
            return MQTTError(code: .system, message: "cannot connect to \(target): \(String(cString: strerror(errnoValue)))")
        case MOSQ_ERR_EAI.rawValue, MOSQ_ERR_LOOKUP.rawValue:
            return MQTTError(code: .lookup, message: "cannot resolve broker host '\(configuration.host)'")
        case MOSQ_ERR_TLS.rawValue, MOSQ_ERR_TLS_HANDSHAKE.rawValue:
            return MQTTError(
                code: .tls,
                message: "TLS handshake with \(target) failed" + (logLine.map { ": \($0)" } ?? "")
                    + " (is the CA file the one that signed the broker certificate, and does the host name match?)")
        default:
            return MQTTError(
                code: MQTTError.Code(rawValue: rc),
                message: "cannot connect to \(target): \(String(cString: mosquitto_strerror(rc)))" + (logLine.map { " (\($0))" } ?? ""))
        }
    }
}
