import AmpelMessages
import CAmpelLinux
import CMosquitto
import Foundation

/// What libmosquitto reports from inside its loop calls, already copied into Swift values.
///
/// Called on the network thread while it is inside `mosquitto_loop_read`/`_write`/`_misc` (log
/// lines also on a publishing thread). An implementation records and returns: it must not call
/// libmosquitto, set callbacks or stop the loop from here.
protocol MosquittoCallbacks: AnyObject {
    func connack(reason: Int32, sessionPresent: Bool)
    func disconnected(reason: Int32)
    func answered(mid: Int32, _ result: AckResult)
    /// A warning or error libmosquitto logged (explains TLS and socket failures).
    func logged(_ line: String)
    /// A message, copied (libmosquitto frees its own when the callback returns). The one
    /// callback that does more than record: it hands the message on to its consumer.
    func received(_ message: MQTTMessage)
}

/// Every call on the client handle: one `struct mosquitto`, configured once, and the calls the
/// layers above need, each returning libmosquitto's code (the library-wide calls, init, version
/// and error texts, are in `MosquittoLibrary` and `MQTTError`). No state, no threads, no
/// decisions (those are ``SessionStateMachine``'s and ``NetworkLoop``'s), the way
/// swift-kafka-client keeps librdkafka behind `RDKafkaClient`.
///
/// `@unchecked Sendable` is sound because of how the session uses it:
/// - the handle is created with `mosquitto_threaded_set(true)`, so libmosquitto guards its
///   queues with its own mutexes, and calls from any thread (publish, subscribe, disconnect)
///   only queue packets;
/// - only the session's network thread calls `connect` and the loop steps;
/// - `mosquitto_destroy` runs in `deinit`, when no thread can hold the client any more.
final class MosquittoClient: @unchecked Sendable {
    private let pointer: OpaquePointer
    private let connectProperties: OpaquePointer?
    let protocolVersion: MQTTConfiguration.ProtocolVersion
    /// A configuration problem found while setting up the handle; thrown by `connect()`.
    let setupError: MQTTError?

    init(configuration: MQTTConfiguration) {
        MosquittoLibrary.ensureInitialised()
        protocolVersion = configuration.protocolVersion
        let clientID: String? = configuration.clientID.isEmpty ? nil : configuration.clientID
        // An empty id with a persistent session is invalid for libmosquitto (EINVAL, nil handle);
        // validate() reports it from connect(), so create a clean-start handle meanwhile.
        let cleanStart = configuration.cleanStart || clientID == nil
        // Without the socket pair that only mosquitto_loop's select reads (see
        // `ampel_refuse_socket_pairs`): queueing a packet then costs no system call.
        ampel_refuse_socket_pairs(1)
        let created = mosquitto_new(clientID, cleanStart, nil)
        ampel_refuse_socket_pairs(0)
        guard let pointer = created else {
            fatalError("libmosquitto could not allocate a client: out of memory")
        }
        self.pointer = pointer
        // A v5 persistent session needs the session-expiry property on every CONNECT; built once.
        var properties: OpaquePointer?
        if configuration.protocolVersion == .v5, let expiry = configuration.sessionExpiry, expiry > .zero {
            let seconds = UInt32(clamping: expiry.components.seconds)
            _ = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), seconds)
        }
        connectProperties = properties
        setupError = Self.configure(pointer, configuration)
    }

    deinit {
        mosquitto_destroy(pointer)
        var properties = connectProperties
        mosquitto_property_free_all(&properties)
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
                        + "): \(MosquittoLibrary.describe(rc)); check that the files exist and are readable")
            }
            _ = mosquitto_tls_opts_set(mosq, tls.verifyPeer ? 1 : 0, nil, nil)
            _ = mosquitto_tls_insecure_set(mosq, !tls.verifyPeer)
        }
        return nil
    }

    // MARK: - Callbacks

    /// libmosquitto's user-data pointer: a box with the target, so that a callback finds it
    /// without a dynamic cast per message.
    private final class CallbackBox {
        unowned(unsafe) let target: any MosquittoCallbacks
        init(_ target: any MosquittoCallbacks) {
            self.target = target
        }
    }

    private var callbackBox: CallbackBox?

    /// Routes libmosquitto's callbacks and messages to `target`, which must outlive every loop
    /// call. Called once, before the network thread starts.
    func install(_ target: any MosquittoCallbacks) {
        let box = CallbackBox(target)
        callbackBox = box
        mosquitto_user_data_set(pointer, Unmanaged.passUnretained(box).toOpaque())
        mosquitto_connect_v5_callback_set(pointer) { _, userdata, reason, flags, _ in
            MosquittoClient.target(userdata)?.connack(reason: reason, sessionPresent: flags & 1 != 0)
        }
        mosquitto_disconnect_v5_callback_set(pointer) { _, userdata, reason, _ in
            MosquittoClient.target(userdata)?.disconnected(reason: reason)
        }
        mosquitto_publish_v5_callback_set(pointer) { _, userdata, mid, reason, _ in
            MosquittoClient.target(userdata)?.answered(mid: mid, .published(reason: reason))
        }
        mosquitto_subscribe_v5_callback_set(pointer) { _, userdata, mid, count, granted, _ in
            let codes = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(count, 0)))) } ?? []
            MosquittoClient.target(userdata)?.answered(mid: mid, .subscribed(granted: codes))
        }
        mosquitto_unsubscribe_v5_callback_set(pointer) { _, userdata, mid, _ in
            MosquittoClient.target(userdata)?.answered(mid: mid, .unsubscribed)
        }
        mosquitto_message_v5_callback_set(pointer) { _, userdata, message, _ in
            guard let message, let receiver = MosquittoClient.target(userdata) else { return }
            // Copied here: libmosquitto frees the message when the callback returns.
            let m = message.pointee
            let payload = [UInt8](UnsafeRawBufferPointer(start: m.payload, count: Int(max(m.payloadlen, 0))))
            receiver.received(
                MQTTMessage(
                    topic: String(cString: m.topic), payload: payload,
                    qos: MQTTQoS(rawValue: Int(m.qos)) ?? .atMostOnce, retain: m.retain))
        }
        setLogCallback(enabled: true)
    }

    private static func target(_ userdata: UnsafeMutableRawPointer?) -> (any MosquittoCallbacks)? {
        userdata.map { Unmanaged<CallbackBox>.fromOpaque($0).takeUnretainedValue().target }
    }

    /// Log lines are only needed to explain a failing connect; while connected, formatting one
    /// per packet would cost throughput. Never called from inside a callback.
    func setLogCallback(enabled: Bool) {
        guard enabled else {
            mosquitto_log_callback_set(pointer, nil)
            return
        }
        mosquitto_log_callback_set(pointer) { _, userdata, level, text in
            guard let text, level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0 else { return }
            MosquittoClient.target(userdata)?.logged(String(cString: text))
        }
    }

    // MARK: - Connection (network thread only)

    /// The blocking connect (`connect_async` has no MQTT 5 variant). Returns the code and the
    /// `errno` it left, for a readable error.
    func connect(host: String, port: Int, keepAlive: Duration) -> (rc: Int32, errno: Int32) {
        let keepAlive = Int32(clamping: keepAlive.components.seconds)
        errno = 0
        let rc =
            protocolVersion == .v5
            ? mosquitto_connect_bind_v5(pointer, host, Int32(port), keepAlive, nil, connectProperties)
            : mosquitto_connect_bind(pointer, host, Int32(port), keepAlive, nil)
        return (rc, errno)
    }

    /// The connection's socket, or -1 when there is none.
    var socket: Int32 { mosquitto_socket(pointer) }
    /// Whether packets wait to be written.
    var wantsWrite: Bool { mosquitto_want_write(pointer) }
    /// errno is cleared first: `mosquitto_loop_read` stops after a packet whenever errno says
    /// EAGAIN, even one left over from an earlier call (a drained wake-up descriptor), and would
    /// leave the rest of a TLS record's packets inside OpenSSL until the broker sends more.
    func loopRead() -> Int32 {
        errno = 0
        return mosquitto_loop_read(pointer, 1)
    }
    func loopWrite() -> Int32 { mosquitto_loop_write(pointer, 1) }
    /// Keep-alive pings and timeouts.
    func loopMisc() -> Int32 { mosquitto_loop_misc(pointer) }

    /// DISCONNECT with reason "normal": the broker discards the Last Will.
    @discardableResult
    func disconnect() -> Int32 {
        mosquitto_disconnect_v5(pointer, Int32(MQTT_RC_NORMAL_DISCONNECTION.rawValue), nil)
    }

    /// Ends the connection without DISCONNECT: the socket is shut down, the next loop step
    /// fails, and the broker, seeing the connection end without DISCONNECT, publishes the Last
    /// Will (at once, or when it runs again if it was frozen). libmosquitto has no call for
    /// this; the socket stays libmosquitto's, which closes it when the loop reports the loss.
    func abortConnection() {
        let socket = mosquitto_socket(pointer)
        if socket >= 0 { _ = shutdown(socket, Int32(SHUT_RDWR)) }
    }

    // MARK: - Packets (any thread)

    /// Queues a publish; returns the code and the message id libmosquitto gave it.
    func publish(_ message: OutgoingMessage) -> (rc: Int32, mid: Int32) {
        var properties: OpaquePointer?
        if let seconds = message.expirySeconds {
            _ = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), seconds)
        }
        defer { if properties != nil { mosquitto_property_free_all(&properties) } }
        var mid: Int32 = 0
        func send(qos: MQTTQoS) -> Int32 {
            // `withCString`, not the implicit String-to-pointer argument conversion: that one copies
            // the topic into a new array on every call; this lends a native string's own storage.
            message.topic.withCString { topic in
                message.payload.withUnsafeBytes { bytes in
                    mosquitto_publish_v5(pointer, &mid, topic, Int32(bytes.count), bytes.baseAddress, Int32(qos.rawValue), message.retain, properties)
                }
            }
        }
        var rc = send(qos: message.qos)
        // An MQTT 5 broker without QoS 2 says so in its CONNACK (Maximum QoS 1), and
        // libmosquitto refuses QoS 2 publishes to it: the most it takes is QoS 1.
        if rc == MosquittoResult.qosNotSupported, message.qos == .exactlyOnce { rc = send(qos: .atLeastOnce) }
        return (rc, mid)
    }

    /// One SUBSCRIBE for `filters` at one QoS (libmosquitto takes a single QoS per packet).
    func subscribe(_ filters: [String], qos: MQTTQoS) -> (rc: Int32, mid: Int32) {
        var mid: Int32 = 0
        let rc = Self.withCStrings(filters) { pointers, count in
            mosquitto_subscribe_multiple(pointer, &mid, count, pointers, Int32(qos.rawValue), 0, nil)
        }
        return (rc, mid)
    }

    func unsubscribe(_ filters: [String]) -> (rc: Int32, mid: Int32) {
        var mid: Int32 = 0
        let rc = Self.withCStrings(filters) { pointers, count in
            mosquitto_unsubscribe_multiple(pointer, &mid, count, pointers, nil)
        }
        return (rc, mid)
    }

    private static func withCStrings<R>(
        _ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>, Int32) -> R
    ) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        return copies.withUnsafeBufferPointer { buffer in body(buffer.baseAddress!, Int32(buffer.count)) }
    }

    // MARK: - Error texts

    /// The broker's refusal of a CONNECT, in words.
    func connackText(_ reason: Int32) -> String {
        String(cString: protocolVersion == .v5 ? mosquitto_reason_string(reason) : mosquitto_connack_string(reason))
    }

    /// Why a connect attempt failed, as an error naming the broker.
    static func connectError(_ rc: Int32, errno connectErrno: Int32, host: String, port: Int, logLine: String?) -> MQTTError {
        let target = "\(host):\(port)"
        switch rc {
        case MOSQ_ERR_ERRNO.rawValue:
            return MQTTError(code: .system, message: "cannot connect to \(target): \(String(cString: strerror(connectErrno)))")
        case MOSQ_ERR_EAI.rawValue, MOSQ_ERR_LOOKUP.rawValue:
            return MQTTError(code: .lookup, message: "cannot resolve broker host '\(host)'")
        case MOSQ_ERR_TLS.rawValue, MOSQ_ERR_TLS_HANDSHAKE.rawValue:
            return MQTTError(
                code: .tls,
                message: "TLS handshake with \(target) failed" + (logLine.map { ": \($0)" } ?? "")
                    + " (is the CA file the one that signed the broker certificate, and does the host name match?)")
        default:
            return MQTTError(
                code: MQTTError.Code(rawValue: rc),
                message: "cannot connect to \(target): \(MosquittoLibrary.describe(rc))" + (logLine.map { " (\($0))" } ?? ""))
        }
    }
}
