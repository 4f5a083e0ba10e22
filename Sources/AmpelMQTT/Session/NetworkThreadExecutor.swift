import Glibc
import Synchronization

/// A task executor that runs a job on the client's network thread when the job is enqueued
/// there, and hands every other job to Swift's global executor.
///
/// A consumer whose task prefers it (``MQTTClient/taskExecutor``) is resumed by a message or an
/// answer on the network thread, and then runs there, between the thread's loop steps: it
/// handles the message and hands its publishes to libmosquitto on the thread that writes them,
/// as a client working inside libmosquitto's callback would, without waking a second thread
/// and being woken back. Whatever resumes it from another thread (a timer, a task of the HTTP
/// server) runs it on the global executor, so the consumer never waits for a thread that is
/// connecting or backing off.
///
/// The queue is touched only by the hosting thread: a job goes into it only when the thread
/// that enqueues it is the host, and only the host runs it.
final class NetworkThreadExecutor: TaskExecutor, @unchecked Sendable {
    /// The hosting thread's `pthread_t`, 0 while no thread runs the queue. Written only by the
    /// host itself: another thread can never read its own identity here.
    private let host = Atomic<UInt>(0)
    private var queued: [UnownedJob] = []
    private var running: [UnownedJob] = []

    func enqueue(_ job: consuming ExecutorJob) {
        if isHost {
            queued.append(UnownedJob(job))
        } else {
            globalConcurrentExecutor.enqueue(job)
        }
    }

    /// The calling thread runs the queue from now on (the network thread, while connected).
    func startHosting() {
        host.store(UInt(pthread_self()), ordering: .relaxed)
    }

    /// The calling thread stops running the queue; what it holds goes to the global executor.
    func stopHosting() {
        assert(isHost)
        host.store(0, ordering: .relaxed)
        let left = queued
        queued.removeAll()
        for job in left { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }

    /// Whether jobs wait for ``runQueued()`` (the host must not sleep then).
    var hasQueued: Bool {
        assert(isHost)
        return !queued.isEmpty
    }

    /// Whether the calling thread hosts the queue (the network thread, while connected).
    var isHost: Bool { host.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// Runs the jobs queued so far, in order; the jobs they queue wait for the next call, so the
    /// thread's socket work comes between (a consumer that yields gets its turn after it).
    ///
    /// A consumer that yields without end keeps the host from sleeping: it polls without
    /// waiting while jobs are queued.
    func runQueued() {
        assert(isHost)
        guard !queued.isEmpty else { return }
        swap(&queued, &running)
        let executor = asUnownedTaskExecutor()
        for job in running { job.runSynchronously(on: executor) }
        running.removeAll(keepingCapacity: true)
    }
}
