import AmpelMessages
/// One message received from the broker, copied out of libmosquitto's buffers.
public struct MQTTMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    /// True when the broker delivered a retained message (e.g. to a new subscriber).
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}

/// The Last Will: published by the broker when the client vanishes without a clean disconnect.
public struct MQTTWill: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}

/// What the broker answered for one filter of a SUBSCRIBE (``MQTTClient/subscribeAnswers(_:)``).
public enum MQTTSubscriptionAnswer: Sendable, Hashable {
    /// Subscribed, at this QoS (at most the one asked for).
    case granted(MQTTQoS)
    /// Refused, with the SUBACK's reason code: any code that is no QoS (0x87 "not authorized"
    /// for an ACL; 0x80 for a filter the SUBACK did not answer).
    case refused(reasonCode: Int)
}

/// A change of the connection, in the order it happened.
public enum MQTTConnectionEvent: Sendable, Hashable {
    /// CONNACK accepted. `sessionPresent` is true when the broker kept the session (and the
    /// subscriptions with it), so the client did not re-subscribe.
    case connected(sessionPresent: Bool)
    /// The connection ended. `reason.code == .success` for a disconnect the client asked for;
    /// otherwise the client reconnects by itself.
    case disconnected(reason: MQTTError)
    /// An attempt to connect again failed (refused credentials, a broker still away); the
    /// client tries again after its backoff.
    case reconnectFailed(reason: MQTTError)
}

/// Counts since the client was created. Read them with ``MQTTClient/counters``.
public struct MQTTCounters: Sendable, Hashable {
    /// Publishes handed to libmosquitto (QoS 0 written or queued, QoS 1/2 queued).
    public var sent: Int
    /// QoS 1/2 publishes made with ``MQTTClient/publish(topic:payload:qos:retain:messageExpiry:)``
    /// that the broker acknowledged (PUBACK/PUBCOMP). Messages handed over with
    /// ``MQTTClient/enqueue(topic:payload:qos:retain:messageExpiry:)`` are not awaited and not
    /// counted here (libmosquitto reports their acknowledgement like the write of a QoS 0 message).
    public var acknowledged: Int
    /// Messages received from the broker (including those then dropped on overflow).
    public var received: Int
    /// Received messages dropped because the ``MQTTClient/messages`` buffer was full.
    public var droppedOnOverflow: Int
    /// Successful connects after the first one.
    public var reconnects: Int
    /// Successful connects to another broker of ``MQTTConfiguration/endpoints`` than the
    /// connection before (also counted in ``reconnects``).
    public var failovers: Int

    public init(sent: Int = 0, acknowledged: Int = 0, received: Int = 0, droppedOnOverflow: Int = 0, reconnects: Int = 0, failovers: Int = 0) {
        self.failovers = failovers
        self.sent = sent
        self.acknowledged = acknowledged
        self.received = received
        self.droppedOnOverflow = droppedOnOverflow
        self.reconnects = reconnects
    }
}
