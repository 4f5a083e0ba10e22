/// What the session hands to libmosquitto, and the broker's answer to it.

/// A message as it is handed to libmosquitto.
struct OutgoingPublish: Sendable {
    var topic: String
    var payload: [UInt8]
    var qos: MQTTQoS
    var retain: Bool
    /// MQTT 5 message expiry in whole seconds.
    var expirySeconds: UInt32?
}

/// The answer to one packet the client sent with a message id.
enum AckResult: Sendable {
    /// PUBACK/PUBCOMP with its reason code (0 or 0x10 = success, >= 0x80 = failure).
    case published(reason: Int32)
    /// SUBACK with the granted QoS or failure code per filter.
    case subscribed(granted: [Int32])
    /// UNSUBACK.
    case unsubscribed
    /// No answer will come (client closed, task cancelled).
    case failed(MQTTError)
}
