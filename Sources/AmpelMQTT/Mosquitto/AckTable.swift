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

/// Matches acknowledgements from the network thread to the tasks awaiting them.
///
/// A plain value kept under the session's gate lock, the same lock under which libmosquitto
/// hands out the message id (`mosquitto_publish`/`subscribe`). A waiter is therefore always
/// registered before its answer can be looked up, and an answer without a waiter (a QoS 0
/// publish's written-note, an `enqueue`d QoS 1 publish, an internal re-subscribe, a cancelled
/// wait) is simply dropped: the table holds waiting tasks and nothing else.
struct AckTable {
    private var waiting: [Int32: CheckedContinuation<AckResult, Never>] = [:]

    /// An answer arrived from the broker. Returns the continuation to resume, outside the lock.
    mutating func answer(mid: Int32) -> CheckedContinuation<AckResult, Never>? {
        waiting.removeValue(forKey: mid)
    }

    /// The sender waits for `mid`.
    mutating func wait(mid: Int32, _ continuation: CheckedContinuation<AckResult, Never>) {
        waiting[mid] = continuation
    }

    /// Stops waiting for `mid` (task cancelled). Returns the continuation to resume.
    mutating func cancel(mid: Int32) -> CheckedContinuation<AckResult, Never>? {
        waiting.removeValue(forKey: mid)
    }

    /// Takes all waiters (client closed); the caller fails them outside the lock.
    mutating func takeAll() -> [CheckedContinuation<AckResult, Never>] {
        let all = Array(waiting.values)
        waiting.removeAll()
        return all
    }

    var waitingCount: Int { waiting.count }
}
