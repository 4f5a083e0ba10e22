import Synchronization

/// Bounds the queue between the MQTT network thread and the daemon's loop.
///
/// When `limit` messages wait, the transport stops reading from the socket: the broker keeps
/// what it has not delivered (as it is built to, within its own queue limits) instead of the
/// daemon's memory growing with a burst. Reading resumes when the queue is down to half.
///
/// The bound holds from ``open()`` on, when the loop that empties the queue runs. Before it, the
/// start waits for the broker's answers (CONNACK, SUBACK, the acknowledgement of `online`, the
/// witness probe), and those come behind whatever the broker kept for the session: a pause then
/// would stop the start for good (with 20,000 messages queued at the broker, or left unhandled in
/// the journal, the daemon never came online again). What the start reads is bounded by the
/// broker's own queue limits (`max_queued_messages`, `max_queued_bytes`).
final class IntakeGate: Sendable {
    let limit: Int
    private let transport: any DaemonTransport
    private let queued = Atomic<Int>(0)
    /// Mirrors `state.paused` for a lock-free look on the hot path.
    private let pausedHint = Atomic<Bool>(false)
    /// Set by ``open()``; until then nothing pauses.
    private let opened = Atomic<Bool>(false)
    private let state = Mutex<(paused: Bool, stopping: Bool, pauses: Int)>((false, false, 0))

    init(limit: Int, transport: any DaemonTransport) {
        self.limit = max(1, limit)
        self.transport = transport
    }

    /// Messages taken and not yet handled.
    var waiting: Int { queued.load(ordering: .relaxed) }
    /// How often reading was paused.
    var pauses: Int { state.withLock { $0.pauses } }

    /// A message was queued (network thread).
    func taken() {
        let count = queued.add(1, ordering: .relaxed).newValue
        guard count >= limit, opened.load(ordering: .relaxed) else { return }
        pauseIfFull()
    }

    /// The loop that empties the queue runs: the bound holds from now on (a queue that is full
    /// already pauses reading at once, and resumes at half as usual).
    func open() {
        opened.store(true, ordering: .sequentiallyConsistent)
        if queued.load(ordering: .relaxed) >= limit { pauseIfFull() }
    }

    private func pauseIfFull() {
        // The transport is told under the lock, so a pause and a resume cannot overtake each other.
        state.withLock { state in
            guard !state.paused, !state.stopping else { return }
            state.paused = true
            state.pauses += 1
            pausedHint.store(true, ordering: .relaxed)
            transport.pauseReading()
        }
    }

    /// A queued message was handled (the daemon's loop).
    func handled() {
        let count = queued.subtract(1, ordering: .relaxed).newValue
        guard count <= limit / 2, pausedHint.load(ordering: .relaxed) else { return }
        state.withLock { state in
            guard state.paused, !state.stopping else { return }
            state.paused = false
            pausedHint.store(false, ordering: .relaxed)
            transport.resumeReading()
        }
    }

    /// A stop begins: nothing more is taken from the socket (what the broker has not handed
    /// over stays with it), whatever the queue.
    func stopTaking() {
        state.withLock { state in
            guard !state.stopping else { return }
            state.stopping = true
            state.paused = true
            transport.pauseReading()
        }
    }

    /// The stop's goodbye needs the broker's acknowledgements: reading resumes. What arrives
    /// now is journaled, not handled (the next start handles it).
    func readForGoodbye() {
        state.withLock { state in
            state.stopping = true
            state.paused = false
            pausedHint.store(false, ordering: .relaxed)
            transport.resumeReading()
        }
    }

    /// The goodbye is over: nothing more is read before the connection ends. Every message
    /// taken so far then has its PUBACK queued ahead of the DISCONNECT, and the broker, with no
    /// more acknowledgements coming, stops sending once its receive maximum is in flight. A
    /// message taken later would go unacknowledged: the broker would deliver it again to the
    /// next start, which has it in its journal and would handle it twice.
    func stopReading() {
        state.withLock { state in
            state.stopping = true
            state.paused = true
            transport.pauseReading()
        }
    }
}
