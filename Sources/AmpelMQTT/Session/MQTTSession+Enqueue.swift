import AmpelMessages
import Synchronization

/// Publishing without waiting: the session's one way from a caller to libmosquitto for a
/// message nobody awaits (``MQTTClient/enqueue(_:acknowledged:)``).
extension MQTTSession {
    /// Hands `message` to libmosquitto now (connected), queues it for the reconnect (QoS 1/2
    /// while away), or throws; `acknowledged` hears the broker's answer on the network thread.
    func enqueue(_ message: OutgoingMessage, acknowledged: (@Sendable (MQTTError?) -> Void)?) throws(MQTTError) {
        try checkExpiry(message)
        let topic = message.topic
        if message.qos == .atMostOnce {
            try sendQoS0(message)
            acknowledged?(nil)
            return
        }
        if let error = MQTTTopicFilter.validateTopicName(topic) { throw error }
        let waiter = acknowledged.map { callback in
            AckWaiter.callback { result in callback(Self.failure(of: result, topic: topic)) }
        }
        let token = waiter == nil ? 0 : nextToken.add(1, ordering: .relaxed).newValue
        let placement = machine.withLock { machine in place(message, token: token, waiter: waiter, machine: &machine) }
        if let error = placementError(placement, message) { throw error }
        sentCount.add(1, ordering: .relaxed)
    }
}

extension MQTTSession {
    /// Whether the network thread reads from the socket (``MQTTClient/pauseReading()``).
    func setReading(_ reading: Bool) {
        loop.setReading(reading)
    }
}
