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
/// libmosquitto hands out the message id only when `mosquitto_publish`/`subscribe` returns, and
/// the network thread may already have received the answer by then. The table therefore keeps
/// answers that arrive first (`early`) until the sender registers, and remembers ids nobody
/// will wait for (QoS 0 publishes, cancelled waits, internal re-subscribes) in `ignored`, so
/// that neither table grows without bound. It is a plain value kept inside the session's lock.
struct AckTable {
    private var waiting: [Int32: CheckedContinuation<AckResult, Never>] = [:]
    private var early: [Int32: AckResult] = [:]
    private var ignored: Set<Int32> = []
    /// QoS 0 ids: their "answer" is libmosquitto's note that the packet was written, which never
    /// comes if the connection drops first; forgotten when the connection ends.
    private var ignoredWhileConnected: Set<Int32> = []

    /// An answer arrived from the broker. Returns the continuation to resume, outside the lock.
    mutating func answer(mid: Int32, _ result: AckResult) -> CheckedContinuation<AckResult, Never>? {
        if let continuation = waiting.removeValue(forKey: mid) { return continuation }
        if ignored.remove(mid) != nil || ignoredWhileConnected.remove(mid) != nil { return nil }
        early[mid] = result
        return nil
    }

    /// The sender will wait for `mid`. Returns the answer at once if it already came.
    mutating func wait(mid: Int32, _ continuation: CheckedContinuation<AckResult, Never>) -> AckResult? {
        if let result = early.removeValue(forKey: mid) { return result }
        waiting[mid] = continuation
        return nil
    }

    /// Nobody will wait for `mid` (drops an early answer, or the one still to come).
    mutating func ignore(mid: Int32) {
        if early.removeValue(forKey: mid) == nil { ignored.insert(mid) }
    }

    /// A QoS 0 publish: its written-note is dropped, or forgotten when the connection ends.
    mutating func ignoreQoS0(mid: Int32) {
        if early.removeValue(forKey: mid) == nil { ignoredWhileConnected.insert(mid) }
    }

    /// Stops waiting for `mid` (task cancelled). Returns the continuation to resume.
    mutating func cancel(mid: Int32) -> CheckedContinuation<AckResult, Never>? {
        guard let continuation = waiting.removeValue(forKey: mid) else { return nil }
        ignored.insert(mid)
        return continuation
    }

    /// The connection ended: QoS 0 packets that were still queued are gone without an answer,
    /// so ids waiting to be ignored would never be cleared.
    mutating func connectionEnded() {
        ignoredWhileConnected.removeAll(keepingCapacity: true)
    }

    /// Takes all waiters (client closed); the caller fails them outside the lock.
    mutating func takeAll() -> [CheckedContinuation<AckResult, Never>] {
        let all = Array(waiting.values)
        waiting.removeAll()
        early.removeAll()
        ignored.removeAll()
        ignoredWhileConnected.removeAll()
        return all
    }

    var waitingCount: Int { waiting.count }
}
