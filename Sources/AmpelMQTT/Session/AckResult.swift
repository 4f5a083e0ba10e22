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
