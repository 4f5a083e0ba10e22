import Foundation
import Synchronization

public struct TestTimeout: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// Runs `body`, failing with ``TestTimeout`` after `timeout` (a guard against hangs, not a wait).
/// Returns at the deadline even if `body` ignores cancellation (it is cancelled and left behind).
public func withTimeout<T: Sendable>(
    _ timeout: Duration = .seconds(15), _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let slot = ContinuationSlot<T>()
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        slot.withLock { $0 = continuation }
        let work = Task {
            do {
                let value = try await body()
                slot.withLock { $0.take() }?.resume(returning: value)
            } catch {
                slot.withLock { $0.take() }?.resume(throwing: error)
            }
        }
        Task {
            await threadSleep(for: timeout)
            if let continuation = slot.withLock({ $0.take() }) {
                work.cancel()
                continuation.resume(throwing: TestTimeout(description: "timed out after \(timeout): \(what)"))
            }
        }
    }
}

/// Hands a continuation to whichever of two racing tasks finishes first.
final class ContinuationSlot<T: Sendable>: Sendable {
    private let slot = Mutex<CheckedContinuation<T, any Error>?>(nil)
    func withLock<R>(_ body: (inout CheckedContinuation<T, any Error>?) -> R) -> R { slot.withLock { body(&$0) } }
}
