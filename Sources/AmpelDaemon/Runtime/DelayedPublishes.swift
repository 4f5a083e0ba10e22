import AmpelMessages
import NIOCore
import Synchronization

/// Publishes handed over after a delay (a new device's alert copy for Home Assistant,
/// decision 75): one queue in due order and one task that sleeps until the first is due.
///
/// Instead of a task per message, and with at most ``limit`` waiting: 100,000 new devices at
/// once made as many sleeping tasks, each holding its copy, and the daemon's memory rose from
/// 57 to 94 MB settled, 67 to 109 MB at the peak (docs/benchmarks.md, "Daemon"). Every delay is
/// the same, so the order of adding is the order due.
final class DelayedPublishes: Sendable {
    /// Messages waiting at most (about 1 KB each): a burst of new devices beyond it does not wait.
    static let limit = 1_000

    private struct State {
        var queue = CircularBuffer<(due: ContinuousClock.Instant, message: OutgoingMessage)>()
        /// A task is draining the queue.
        var draining = false
    }
    private let state = Mutex(State())
    private let transport: any DaemonTransport
    private let failed = Atomic<Int>(0)

    init(transport: any DaemonTransport) {
        self.transport = transport
    }

    /// Hands `message` to the transport once `delay` has passed; `false` (and nothing queued)
    /// when ``limit`` messages wait already. A stop in between closes the transport: the
    /// message is dropped, as at a crash.
    func add(_ message: OutgoingMessage, after delay: Duration) -> Bool {
        let due = ContinuousClock.now + delay
        let (added, start) = state.withLock { state in
            guard state.queue.count < Self.limit else { return (false, false) }
            state.queue.append((due, message))
            defer { state.draining = true }
            return (true, !state.draining)
        }
        if start { Task { await drain() } }
        return added
    }

    /// Messages waiting, for the tests.
    var waiting: Int { state.withLock { $0.queue.count } }

    /// Messages the transport refused when they fell due (closed, disconnected at QoS 0): they
    /// count in `publishFailures` with the executor's own.
    var failures: Int { failed.load(ordering: .relaxed) }

    private func drain() async {
        while true {
            let (ready, next) = takeDue(now: .now)
            for message in ready {
                do {
                    try transport.enqueue(message, acknowledged: nil)
                } catch {
                    failed.add(1, ordering: .relaxed)
                }
            }
            guard let next else { return }
            try? await Task.sleep(until: next, clock: .continuous)
        }
    }

    /// The messages due at `now`, and when the next one is; `nil` (and the drain ends) once
    /// none is left.
    private func takeDue(now: ContinuousClock.Instant) -> (ready: [OutgoingMessage], next: ContinuousClock.Instant?) {
        state.withLock { state in
            var ready: [OutgoingMessage] = []
            while let first = state.queue.first, first.due <= now {
                ready.append(first.message)
                state.queue.removeFirst()
            }
            if let first = state.queue.first { return (ready, first.due) }
            // A burst's storage goes with it.
            state.queue = CircularBuffer()
            // Nothing left: the next add starts a new drain (after the messages taken now).
            if ready.isEmpty { state.draining = false }
            return (ready, ready.isEmpty ? nil : now)
        }
    }
}
