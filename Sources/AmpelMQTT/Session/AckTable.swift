/// Matches the broker's answers to the tasks awaiting them, by message id.
///
/// A plain value inside ``SessionStateMachine``, kept under the session's lock, the same lock
/// under which libmosquitto hands out the message id (`mosquitto_publish`/`subscribe`). A
/// waiter is therefore always registered before its answer can be looked up, and an answer
/// without a waiter (a QoS 0 publish's written-note, an `enqueue`d QoS 1 publish, an internal
/// re-subscribe, a cancelled wait) is simply dropped: the table holds waiting tasks and nothing
/// else.
///
/// Each waiter also carries the token its publishing task drew before it started, so that a
/// cancellation handler, which cannot know the message id, can find it. An entry leaves the
/// table exactly once (answer, cancel or close), and whoever removes it resumes it.
struct AckTable<Waiter> {
    private struct Entry {
        var token: UInt64
        var waiter: Waiter
    }

    private var waiting: [Int32: Entry] = [:]

    /// An answer arrived from the broker. Returns the waiter to resume, outside the lock.
    mutating func answer(mid: Int32) -> Waiter? {
        waiting.removeValue(forKey: mid)?.waiter
    }

    /// The sender with `token` waits for `mid`.
    mutating func wait(mid: Int32, token: UInt64, _ waiter: Waiter) {
        waiting[mid] = Entry(token: token, waiter: waiter)
    }

    /// Stops the wait of the sender with `token` (task cancelled): a scan, as cancelling is rare.
    mutating func cancel(token: UInt64) -> (mid: Int32, waiter: Waiter)? {
        guard let entry = waiting.first(where: { $0.value.token == token }) else { return nil }
        waiting.removeValue(forKey: entry.key)
        return (entry.key, entry.value.waiter)
    }

    /// Takes all waiters (client closed); the caller fails them outside the lock.
    mutating func takeAll() -> [Waiter] {
        let all = waiting.values.map(\.waiter)
        waiting.removeAll()
        return all
    }

    var waitingCount: Int { waiting.count }
}
