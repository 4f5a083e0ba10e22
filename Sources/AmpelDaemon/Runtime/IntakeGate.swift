import Synchronization

/// Bounds the queue between the MQTT network thread and the daemon's loop.
///
/// When `limit` messages or `byteLimit` payload bytes wait, the transport stops reading from
/// the socket: the broker keeps what it has not delivered (as it is built to, within its own
/// queue limits) instead of the daemon's memory growing with a burst. Reading resumes when the
/// queue is down to half of both.
///
/// The bound holds once the loop that empties the queue runs (``loopStarted()``). Before it, the
/// start waits for the broker's answers (CONNACK, SUBACK, the acknowledgement of `online`, the
/// witness probe), and those come behind whatever the broker kept for the session: a pause then
/// would stop the start for good (with 20,000 messages queued at the broker, or left unhandled in
/// the journal, the daemon never came online again). What the start reads is bounded by the
/// broker's own queue limits (`max_queued_messages`, `max_queued_bytes`).
final class IntakeGate: Sendable {
    let limit: Int
    let byteLimit: Int
    private let transport: any DaemonTransport
    private let queued = Atomic<Int>(0)
    private let queuedBytes = Atomic<Int>(0)
    /// Mirrors `state.paused` for a lock-free look on the hot path.
    private let pausedHint = Atomic<Bool>(false)
    /// Mirrors `state.loopRunning`, for ``sheds(qos0:)`` on the network thread.
    private let loopRunningHint = Atomic<Bool>(false)
    private let shedCount = Atomic<Int>(0)
    private let state = Mutex<State>(State())

    private struct State {
        var paused = false
        var stopping = false
        var pauses = 0
        /// The loop waits for the broker's acknowledgements (``holdOpen(_:)``).
        var heldOpen = false
        var loopRunning = false
    }

    init(limit: Int, byteLimit: Int = 16 << 20, transport: any DaemonTransport) {
        self.limit = max(1, limit)
        self.byteLimit = max(1, byteLimit)
        self.transport = transport
    }

    /// Messages taken and not yet handled.
    var waiting: Int { queued.load(ordering: .relaxed) }
    /// How often reading was paused.
    var pauses: Int { state.withLock { $0.pauses } }

    /// A message of `bytes` was queued (network thread).
    func taken(bytes: Int) {
        let count = queued.add(1, ordering: .relaxed).newValue
        let total = queuedBytes.add(bytes, ordering: .relaxed).newValue
        guard count >= limit || total >= byteLimit else { return }
        // The transport is told under the lock, so a pause and a resume cannot overtake each other.
        state.withLock { state in
            guard state.loopRunning, !state.paused, !state.stopping, !state.heldOpen else { return }
            pause(&state, counted: true)
        }
    }

    /// QoS 0 messages shed at a full queue so far (``sheds(qos0:)``).
    var shed: Int { shedCount.load(ordering: .relaxed) }

    /// Whether a QoS 0 message arriving now is shed instead of queued (network thread), and
    /// counts it: at twice the bound (count or bytes). While the loop waits for
    /// acknowledgements (``holdOpen(_:)``) reading goes on past the bound, and a burst of QoS 0
    /// fixes then filled the queue without limit: 300,000 of them took the daemon from 35 to
    /// 100 MB. Twice the bound leaves that wait its room (shedding at the bound itself shed 70 %
    /// of such a burst). A QoS 0 message was never acknowledged, so its sender expects it may be
    /// lost; a QoS 1 message is always taken. Before the loop runs, nothing is shed: the start's
    /// backlog is bounded by the broker's queue.
    func sheds(qos0: Bool) -> Bool {
        guard qos0, loopRunningHint.load(ordering: .relaxed),
              queued.load(ordering: .relaxed) >= 2 * limit || queuedBytes.load(ordering: .relaxed) >= 2 * byteLimit
        else { return false }
        shedCount.add(1, ordering: .relaxed)
        return true
    }

    /// Whether the queue is at its bound (count or bytes).
    private var full: Bool {
        queued.load(ordering: .relaxed) >= limit || queuedBytes.load(ordering: .relaxed) >= byteLimit
    }

    /// Stops reading; `counted` for a full queue (`intakePaused`), not for a stop. Under the
    /// lock, so a pause and a resume cannot overtake each other.
    private func pause(_ state: inout State, counted: Bool) {
        state.paused = true
        if counted {
            state.pauses += 1
            pausedHint.store(true, ordering: .relaxed)
        }
        transport.pauseReading()
    }

    private func resume(_ state: inout State) {
        state.paused = false
        pausedHint.store(false, ordering: .relaxed)
        transport.resumeReading()
    }

    /// A queued message of `bytes` was handled (the daemon's loop).
    func handled(bytes: Int) {
        let count = queued.subtract(1, ordering: .relaxed).newValue
        let total = queuedBytes.subtract(bytes, ordering: .relaxed).newValue
        guard count <= limit / 2, total <= byteLimit / 2, pausedHint.load(ordering: .relaxed) else { return }
        state.withLock { state in
            guard state.paused, !state.stopping else { return }
            resume(&state)
        }
    }

    /// While the loop waits for the broker to acknowledge its publishes, reading goes on even
    /// with a full queue: the acknowledgements come on the same socket as the messages, and a
    /// paused socket would leave the loop waiting for them. The queue may grow past the limit
    /// meanwhile, by what the broker sends before the acknowledgements (docs/benchmarks.md, "Bursts").
    func holdOpen(_ open: Bool) {
        state.withLock { state in
            guard !state.stopping, state.heldOpen != open else { return }
            state.heldOpen = open
            if open, state.paused {
                resume(&state)
            } else if !open, !state.paused, full {
                pause(&state, counted: true)
            }
        }
    }

    /// A stop begins: nothing more is taken from the socket (what the broker has not handed
    /// over stays with it), whatever the queue. Before the loop runs (``loopStarted()``), the
    /// start still awaits the broker's answers (SUBACK, UNSUBACK, PUBACK) on that socket: the
    /// pause then waits for the loop, which ends at once; what arrives meanwhile is journaled.
    func stopTaking() {
        state.withLock { state in
            guard !state.stopping else { return }
            state.stopping = true
            guard state.loopRunning else { return }
            pause(&state, counted: false)
        }
    }

    /// The daemon's loop runs: the start's round trips to the broker are over, the bound holds
    /// (a queue that is full already pauses reading at once, and resumes at half as usual), and
    /// a stop requested meanwhile stops reading now.
    func loopStarted() {
        state.withLock { state in
            state.loopRunning = true
            loopRunningHint.store(true, ordering: .relaxed)
            guard !state.paused, state.stopping || full else { return }
            pause(&state, counted: !state.stopping)
        }
    }

    /// The stop's goodbye needs the broker's acknowledgements: reading resumes. What arrives
    /// now is journaled, not handled (the next start handles it).
    func readForGoodbye() {
        state.withLock { state in
            state.stopping = true
            resume(&state)
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
            pause(&state, counted: false)
        }
    }
}
