import Synchronization

/// A value that other threads change (a child's output, a subscriber's messages), and a wait
/// until it satisfies a predicate: woken by the change itself, never by polling.
public final class Watched<Value: Sendable>: Sendable {
    private struct Waiter {
        let test: @Sendable (Value) -> Bool
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var value: Value
        var waiters: [UInt64: Waiter] = [:]
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>

    public init(_ value: Value) {
        state = Mutex(State(value: value))
    }

    public var value: Value { state.withLock { $0.value } }

    /// Changes the value and wakes every wait whose predicate now holds.
    public func update(_ body: (inout Value) -> Void) {
        let ready: [CheckedContinuation<Void, Never>] = state.withLock { state in
            body(&state.value)
            let value = state.value
            let satisfied = state.waiters.filter { $0.value.test(value) }
            for id in satisfied.keys { state.waiters[id] = nil }
            return satisfied.values.map(\.continuation)
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once `test` holds for the value (at once if it does now). Cancelling the task
    /// (a timeout) ends the wait.
    public func wait(until test: @escaping @Sendable (Value) -> Bool) async {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now: Bool = state.withLock { state in
                    if test(state.value) || Task.isCancelled { return true }
                    state.waiters[id] = Waiter(test: test, continuation: continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
        }
    }
}
