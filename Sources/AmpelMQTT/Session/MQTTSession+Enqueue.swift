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
        enum Outcome { case handedOver, refused(Int32), full, closed }
        let waiter = acknowledged.map { callback in
            AckWaiter.callback { result in callback(Self.failure(of: result, topic: topic)) }
        }
        let token = waiter == nil ? 0 : nextToken.add(1, ordering: .relaxed).newValue
        let outcome: Outcome = machine.withLock { machine in
            switch machine.publish(message, token: token, waiter: waiter) {
            case .queued:
                handedOver()
                return .handedOver
            case .offlineQueueFull: return .full
            case .closed: return .closed
            case .send:
                handedOver()
                let (refused, mid) = handOver(message, withWaiter: waiter != nil, machine: &machine)
                if let refused { return .refused(refused) }
                if let waiter { machine.sent(mid: mid, token: token, waiter: waiter) }
                return .handedOver
            }
        }
        switch outcome {
        case .handedOver: sentCount.add(1, ordering: .relaxed)
        case .refused(let rc): throw publishFailure(rc, topic: topic, qos: message.qos)
        case .full: throw SessionErrors.offlineQueueFull(topic, limit: configuration.offlineQueueLimit)
        case .closed: throw SessionErrors.closed
        }
    }
}

extension MQTTSession {
    /// Whether the network thread reads from the socket (``MQTTClient/pauseReading()``).
    func setReading(_ reading: Bool) {
        loop.setReading(reading)
    }
}
