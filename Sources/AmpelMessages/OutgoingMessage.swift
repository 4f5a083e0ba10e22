/// The MQTT quality of service of a publish or subscription.
public enum MQTTQoS: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// QoS 0: sent once, no acknowledgement; lost if the connection is down.
    case atMostOnce = 0
    /// QoS 1: acknowledged by the broker (PUBACK); may arrive twice, never lost once accepted.
    case atLeastOnce = 1
    /// QoS 2: four-way handshake; arrives exactly once.
    case exactlyOnce = 2

    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One message to publish: what the daemon's engine decides and what is handed to
/// libmosquitto, the same value all the way (no copy into another shape on the way). In a module
/// of its own, so that the pure engine names its messages without depending on the MQTT client.
public struct OutgoingMessage: Sendable, Hashable, CustomStringConvertible {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool
    /// MQTT 5 message expiry (whole seconds, at least 1); `nil` for none. Refused on 3.1.1.
    public var expiry: Duration?

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false, expiry: Duration? = nil) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.expiry = expiry
    }

    public init(topic: String, text: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false, expiry: Duration? = nil) {
        self.init(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain, expiry: expiry)
    }

    /// The payload as text.
    public var text: String { String(decoding: payload, as: UTF8.self) }

    public var description: String { "\(topic) \(retain ? "[retained] " : "")\(text)" }

    /// The expiry as libmosquitto's property takes it.
    package var expirySeconds: UInt32? { expiry.map { UInt32(clamping: max($0.components.seconds, 1)) } }
}
