import Synchronization

/// Resumes a continuation with the first of several outcomes (the others are dropped).
final class FirstOutcome: Sendable {
    private let continuation = Mutex<CheckedContinuation<Bool, Never>?>(nil)

    func set(_ continuation: CheckedContinuation<Bool, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func resume(_ value: Bool) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }

    /// Runs `work` on a task of its own; `true` if it returned `true` before `deadline`, else
    /// `false` at the deadline. Not a task group, which would wait for `work` even after it.
    static func finished(before deadline: ContinuousClock.Instant, priority: TaskPriority? = nil,
                         _ work: @escaping @Sendable () async -> Bool) async -> Bool {
        let outcome = FirstOutcome()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            outcome.set(continuation)
            Task.detached(priority: priority) {
                if await work() { outcome.resume(true) }
            }
            Task.detached {
                try? await Task.sleep(until: deadline)
                outcome.resume(false)
            }
        }
    }
}
