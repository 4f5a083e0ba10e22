import Synchronization

/// A requested stop (SIGTERM, SIGINT, ``AmpelDaemon/stop()``): whether one came, when the
/// handling of what was taken ends, and the signal that puts the stop into the loop's queue.
final class StopRequest: Sendable {
    private let requested = Atomic<Bool>(false)
    private let handlingDeadline = Mutex<ContinuousClock.Instant?>(nil)
    /// One element per ``wake()``, for the task that queues the stop behind the inputs.
    let signals: AsyncStream<Void>
    private let signal: AsyncStream<Void>.Continuation

    init() {
        (signals, signal) = AsyncStream.makeStream()
    }

    /// Notes the stop; `true` the first time only (the caller then stops taking messages), with
    /// `drain` from now to handle what was taken.
    func request(drain: Duration) -> Bool {
        guard !requested.exchange(true, ordering: .sequentiallyConsistent) else { return false }
        handlingDeadline.withLock { $0 = .now + drain }
        return true
    }

    var isRequested: Bool { requested.load(ordering: .relaxed) }

    /// When the handling of taken messages ends; `nil` before a request.
    var handlingEnds: ContinuousClock.Instant? { handlingDeadline.withLock { $0 } }

    /// Puts the stop into the loop's queue (``AmpelDaemon/startProducers(_:)``).
    func wake() {
        signal.yield()
    }
}
