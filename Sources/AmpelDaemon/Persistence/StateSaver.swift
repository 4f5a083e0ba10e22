import AmpelData
import AmpelDomain
import Foundation
import Logging
import Synchronization

/// Writes the daemon's state on a thread of its own, newest state first.
///
/// The daemon's loop hands over a copy (copy-on-write: cheap until the engine changes it) and
/// goes on; the writer thread writes it with ``StateStore/save(_:)``. States handed over while a
/// write runs replace each other, so a slow disk costs one write per interval, not a queue.
///
/// The writer runs at the lowest CPU priority Linux has (`SCHED_IDLE`): with many devices a
/// write is tens of megabytes of JSON, and on a small machine it must not take the CPU from the
/// loop and the network thread while fixes are arriving (at normal priority it shows up in the
/// latency tail). It still gets the CPU whenever the daemon is idle.
///
/// The thread exists only while it has work, and ends when none is left: a process exits only
/// once each of its threads has run to its end, and on a busy machine an idle-class thread gets
/// no CPU for that either, even one asleep with nothing to do. A writer thread kept waiting for
/// work held every stop under load up to its exit for 3-10 s after the daemon had finished
/// (docs/DESIGN.md, decision 35).
///
/// Every state handed over gets a generation, and a write puts its file in place only when no
/// newer generation is there already. So ``writeNow(_:)`` (the stop's snapshot) never waits for
/// the writer thread: on a busy machine its idle class can get no CPU for seconds, and a stop
/// that waited for it behind a lock ran out of its limit with no state file written at all.
final class StateSaver: Sendable {
    private struct Shared {
        var pending: PersistedState?
        var pendingGeneration: UInt64 = 0
        /// The last generation handed out.
        var issued: UInt64 = 0
        /// Called once the pending state (or a newer one) is on disk.
        var written: [@Sendable () -> Void] = []
        var trim = false
        /// Whether the writer thread is running; it clears this, under the lock, when it finds
        /// no work left and ends.
        var running = false

        var hasWork: Bool { pending != nil || trim }

        /// Whether the caller must start the writer thread for the work just added.
        mutating func claimStart() -> Bool {
            guard hasWork, !running else { return false }
            running = true
            return true
        }
    }

    private let worker: Worker

    /// - Parameter writerEnded: called on the writer thread as it ends (for tests).
    init(store: StateStore, logger: Logger, writerEnded: (@Sendable () -> Void)? = nil) {
        worker = Worker(store: store, logger: logger, ended: writerEnded)
    }

    /// Schedules a write of `state` (or of a newer one handed over before the write starts);
    /// `written` is called on the writer thread once it is on disk.
    func save(_ state: PersistedState, written: (@Sendable () -> Void)? = nil) {
        schedule { shared in
            shared.issued += 1
            shared.pending = state
            shared.pendingGeneration = shared.issued
            if let written { shared.written.append(written) }
        }
    }

    /// Writes `state` now, on the calling thread at its priority (the stop's snapshot: the
    /// writer thread's idle class may get no CPU on a busy machine). A write in progress on the
    /// writer thread goes on beside it; being older, it is discarded if it ends later.
    func writeNow(_ state: PersistedState) -> Bool {
        let generation = worker.shared.withLock { shared in
            shared.issued += 1
            return shared.issued
        }
        return worker.write(state, generation: generation)
    }

    /// How many states have been put in place so far (by either thread): the daemon trims the
    /// heap once the intake is quiet after a write.
    var statesWritten: Int { worker.writeCount.load(ordering: .relaxed) }

    /// Gives free heap pages back to the system, on the writer thread after any write.
    ///
    /// `malloc_trim` holds the allocator's locks while it walks the heap; the daemon asks for it
    /// when its table has grown and the intake has gone quiet, so no fix waits behind it.
    func trimHeap() {
        schedule { $0.trim = true }
    }

    /// Adds work under the lock and starts the writer thread unless it runs already.
    private func schedule(_ work: (inout Shared) -> Void) {
        let start = worker.shared.withLock { shared in
            work(&shared)
            return shared.claimStart()
        }
        if start { worker.startThread() }
    }

    /// The writer thread's side.
    private final class Worker: Sendable {
        let store: StateStore
        let logger: Logger
        let shared = Mutex(Shared())
        /// The generation of the state in place; held while a write puts its file in place (a
        /// rename: the writer thread holds it for microseconds, never while it encodes).
        let inPlace = Mutex<UInt64>(0)
        let writeCount = Atomic<Int>(0)

        let ended: (@Sendable () -> Void)?

        init(store: StateStore, logger: Logger, ended: (@Sendable () -> Void)?) {
            self.store = store
            self.logger = logger
            self.ended = ended
        }

        func startThread() {
            let thread = Thread { self.run() }
            thread.name = "ampel-state"
            thread.start()
        }

        private func run() {
            ProcessMemory.lowerCurrentThreadToIdle()
            while true {
                let work = shared.withLock { shared in
                    guard shared.hasWork else {
                        shared.running = false
                        return nil as (PersistedState?, UInt64, [@Sendable () -> Void], Bool)?
                    }
                    defer { shared.pending = nil; shared.written = []; shared.trim = false }
                    return (shared.pending, shared.pendingGeneration, shared.written, shared.trim)
                }
                guard let (state, generation, written, trim) = work else {
                    ended?()
                    return
                }
                if let state, write(state, generation: generation) {
                    for callback in written { callback() }
                }
                if trim {
                    let start = ContinuousClock.now
                    ProcessMemory.trim()
                    logger.debug("heap trimmed", metadata: ["took": "\(ContinuousClock.now - start)"])
                }
            }
        }

        /// Writes `state` and puts it in place unless a newer generation is there already.
        /// - Returns: whether `state` or a newer one is on disk.
        func write(_ state: PersistedState, generation: UInt64) -> Bool {
            let start = ContinuousClock.now
            do {
                let prepared = try store.write(state)
                try inPlace.withLock { (latest: inout UInt64) throws(StateStoreError) in
                    guard generation > latest else {
                        prepared.discard()
                        return
                    }
                    do {
                        try prepared.replace()
                    } catch {
                        throw StateStoreError("\(error)")
                    }
                    latest = generation
                }
            } catch {
                logger.error("cannot save state", metadata: ["error": "\(error)"])
                return false
            }
            writeCount.add(1, ordering: .relaxed)
            logger.debug("state saved", metadata: ["devices": "\(state.devices.count)", "took": "\(ContinuousClock.now - start)"])
            return true
        }
    }
}
