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
///
/// Each waiter also carries the token its publishing task drew before it started, so that a
/// cancellation handler, which cannot know the message id, can find it. The continuations are
/// unchecked: an entry leaves the table exactly once (answer, cancel or close), and whoever
/// removes it resumes it.
struct AckTable {
    struct Waiter {
        var token: UInt64
        var continuation: UnsafeContinuation<AckResult, Never>
    }

    private var waiting: [Int32: Waiter] = [:]

    /// An answer arrived from the broker. Returns the continuation to resume, outside the lock.
    mutating func answer(mid: Int32) -> UnsafeContinuation<AckResult, Never>? {
        waiting.removeValue(forKey: mid)?.continuation
    }

    /// The sender with `token` waits for `mid`.
    mutating func wait(mid: Int32, token: UInt64, _ continuation: UnsafeContinuation<AckResult, Never>) {
        waiting[mid] = Waiter(token: token, continuation: continuation)
    }

    /// Stops the wait of the sender with `token` (task cancelled): a scan, as cancelling is rare.
    /// Returns the message id and the continuation to resume.
    mutating func cancel(token: UInt64) -> (mid: Int32, continuation: UnsafeContinuation<AckResult, Never>)? {
        guard let entry = waiting.first(where: { $0.value.token == token }) else { return nil }
        waiting.removeValue(forKey: entry.key)
        return (entry.key, entry.value.continuation)
    }

    /// Takes all waiters (client closed); the caller fails them outside the lock.
    mutating func takeAll() -> [UnsafeContinuation<AckResult, Never>] {
        let all = waiting.values.map(\.continuation)
        waiting.removeAll()
        return all
    }

    var waitingCount: Int { waiting.count }
}
