import CMosquitto

/// An error from the MQTT client: a libmosquitto code plus a sentence a person can act on.
///
/// The code is a struct with static constants rather than an enum, so that codes libmosquitto
/// adds later (or that the client defines itself) never break an exhaustive `switch` in callers.
/// Compare with the constants: `error.code == .connectionRefused`.
///
/// When the broker answered with an MQTT reason code (a refused CONNACK, a negative PUBACK or
/// SUBACK), ``reasonCode`` holds it, e.g. `0x86` (bad user name or password) for MQTT 5 or `5`
/// (not authorised) for MQTT 3.1.1.
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A libmosquitto error number (`MOSQ_ERR_*`) or one of the client's own codes (>= 1000).
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// No error; used as the reason of a disconnect the client asked for.
        public static let success = Code(rawValue: Int32(MOSQ_ERR_SUCCESS.rawValue))
        public static let outOfMemory = Code(rawValue: Int32(MOSQ_ERR_NOMEM.rawValue))
        public static let protocolError = Code(rawValue: Int32(MOSQ_ERR_PROTOCOL.rawValue))
        /// An argument was rejected (bad topic, QoS, empty client id with a persistent session...).
        public static let invalidArgument = Code(rawValue: Int32(MOSQ_ERR_INVAL.rawValue))
        /// The client is not connected (QoS 0 publishes and subscribes while disconnected).
        public static let noConnection = Code(rawValue: Int32(MOSQ_ERR_NO_CONN.rawValue))
        /// The broker refused the connection (CONNACK reason in ``MQTTError/reasonCode``).
        public static let connectionRefused = Code(rawValue: Int32(MOSQ_ERR_CONN_REFUSED.rawValue))
        public static let notFound = Code(rawValue: Int32(MOSQ_ERR_NOT_FOUND.rawValue))
        /// The connection to the broker broke.
        public static let connectionLost = Code(rawValue: Int32(MOSQ_ERR_CONN_LOST.rawValue))
        /// TLS set-up or handshake failed (unknown CA, wrong host name, unreadable files).
        public static let tls = Code(rawValue: Int32(MOSQ_ERR_TLS.rawValue))
        public static let payloadTooLarge = Code(rawValue: Int32(MOSQ_ERR_PAYLOAD_SIZE.rawValue))
        public static let notSupported = Code(rawValue: Int32(MOSQ_ERR_NOT_SUPPORTED.rawValue))
        public static let authentication = Code(rawValue: Int32(MOSQ_ERR_AUTH.rawValue))
        public static let aclDenied = Code(rawValue: Int32(MOSQ_ERR_ACL_DENIED.rawValue))
        public static let unknown = Code(rawValue: Int32(MOSQ_ERR_UNKNOWN.rawValue))
        /// A system call failed (connection refused by the host, unreachable network...).
        public static let system = Code(rawValue: Int32(MOSQ_ERR_ERRNO.rawValue))
        /// The host name could not be resolved.
        public static let lookup = Code(rawValue: Int32(MOSQ_ERR_EAI.rawValue))
        public static let malformedUTF8 = Code(rawValue: Int32(MOSQ_ERR_MALFORMED_UTF8.rawValue))
        /// The broker did not answer within the keep-alive interval.
        public static let keepAlive = Code(rawValue: Int32(MOSQ_ERR_KEEPALIVE.rawValue))
        public static let malformedPacket = Code(rawValue: Int32(MOSQ_ERR_MALFORMED_PACKET.rawValue))
        public static let tlsHandshake = Code(rawValue: Int32(MOSQ_ERR_TLS_HANDSHAKE.rawValue))
        public static let oversizePacket = Code(rawValue: Int32(MOSQ_ERR_OVERSIZE_PACKET.rawValue))
        public static let timeout = Code(rawValue: Int32(MOSQ_ERR_TIMEOUT.rawValue))
        public static let administrativeAction = Code(rawValue: Int32(MOSQ_ERR_ADMINISTRATIVE_ACTION.rawValue))

        /// The broker URL could not be parsed.
        public static let invalidURL = Code(rawValue: 1000)
        /// The configuration is inconsistent (see the message).
        public static let invalidConfiguration = Code(rawValue: 1001)
        /// The client was disconnected by ``MQTTClient/disconnect()`` (or released) and cannot be used again.
        public static let closed = Code(rawValue: 1002)
        /// The broker answered a publish, subscribe or unsubscribe with a failure reason code.
        public static let rejected = Code(rawValue: 1003)
        /// The waiting task was cancelled; a message already handed to the library may still be sent.
        public static let cancelled = Code(rawValue: 1004)
        /// ``MQTTClient/connect()`` was called while a connection is already up or being made.
        public static let alreadyConnected = Code(rawValue: 1005)
        /// A topic or topic filter is not valid MQTT.
        public static let invalidTopic = Code(rawValue: 1006)
        /// A publish while disconnected found ``MQTTConfiguration/offlineQueueLimit`` messages
        /// already waiting for the connection.
        public static let offlineQueueFull = Code(rawValue: 1007)

        public var description: String {
            switch self {
            case .invalidURL: return "invalid URL"
            case .invalidConfiguration: return "invalid configuration"
            case .closed: return "client closed"
            case .rejected: return "rejected by broker"
            case .cancelled: return "cancelled"
            case .alreadyConnected: return "already connected"
            case .invalidTopic: return "invalid topic"
            case .offlineQueueFull: return "offline queue full"
            default: return String(cString: mosquitto_strerror(rawValue))
            }
        }
    }

    /// What went wrong, as a code to compare against.
    public let code: Code
    /// The MQTT reason code the broker sent, when the error came from a broker answer.
    public let reasonCode: Int?
    /// A readable explanation, e.g. `connection refused by broker 127.0.0.1:1883: Bad user name or password`.
    public let message: String

    public init(code: Code, reasonCode: Int? = nil, message: String) {
        self.code = code
        self.reasonCode = reasonCode
        self.message = message
    }

    /// The message alone: logs, `/readyz` and the CLI show it to people, who need no type name.
    public var description: String { message }
}

extension MQTTError: CustomDebugStringConvertible {
    public var debugDescription: String { "MQTTError(\(code.rawValue)): \(message)" }
}

extension MQTTError {
    /// An error for a libmosquitto return value, with what the caller was doing as context.
    static func mosquitto(_ rc: Int32, _ context: String) -> MQTTError {
        MQTTError(code: Code(rawValue: rc), message: "\(context): \(String(cString: mosquitto_strerror(rc)))")
    }
}

/// Errors the session reports in more than one place.
enum SessionErrors {
    static let closed = MQTTError(code: .closed, message: "the MQTT client was disconnected and cannot be used again")
    static let requestedDisconnect = MQTTError(code: .success, message: "disconnected by the client")

    static func cancelled(_ mid: Int32?) -> MQTTError {
        MQTTError(
            code: .cancelled,
            message: "stopped waiting for the acknowledgement of message \(mid ?? 0); it may still be delivered")
    }

    static func offlineQueueFull(_ topic: String, limit: Int) -> MQTTError {
        MQTTError(
            code: .offlineQueueFull,
            message: "publish to '\(topic)' refused: \(limit) messages already wait for the connection (offlineQueueLimit)")
    }
}

extension MQTTError {
    /// An MQTT 5 reason code in words, e.g. "Not authorized" for `0x87`.
    public static func describeReason(_ reason: Int) -> String {
        MosquittoLibrary.describeReason(Int32(truncatingIfNeeded: reason))
    }
}
