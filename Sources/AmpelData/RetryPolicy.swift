import AmpelCore

/// How often and after which pause a failed request is tried again.
///
/// Transient failures (network errors, timeouts, HTTP 408/429/5xx) are retried with
/// exponential backoff and jitter, so that many daemons restarted at once do not hit the
/// RKI service in lockstep. Answers that arrived but are wrong (an ArcGIS error body,
/// malformed JSON, a missing field) are not retried: the next scheduled refresh asks again.
///
/// The pause is taken by ``sleep``, which tests replace (for example with a function that
/// records the delays and returns at once), so no test waits for real time.
public struct RetryPolicy: Sendable {
    /// Attempts per request, the first included; `1` means no retry.
    public var maxAttempts: Int
    /// The pauses between them.
    public var backoff: Backoff
    /// Waits for a pause; throws `CancellationError` when the task is cancelled.
    public var sleep: @Sendable (Duration) async throws -> Void

    /// - Parameters:
    ///   - baseDelay: the pause before the first retry; doubled before each further one.
    ///   - maxDelay: the longest pause, whatever the attempt.
    ///   - jitter: the share of each pause that is random, `0...1` (``Backoff/jitter``).
    public init(
        maxAttempts: Int = 4,
        baseDelay: Duration = .seconds(2),
        maxDelay: Duration = .seconds(60),
        jitter: Double = 0.5,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.backoff = Backoff(minimum: baseDelay, maximum: maxDelay, jitter: jitter)
        self.sleep = sleep
    }

    /// Four attempts, 2 s, 4 s, 8 s apart (each minus up to half of it).
    public static let standard = RetryPolicy()

    /// A single attempt.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// The pause before retry number `retry` (1 for the first retry).
    ///
    /// - Parameter random: a number in `0..<1`; the pause is the exponential delay shortened
    ///   by `jitter * random` of it.
    public func delay(beforeRetry retry: Int, random: Double) -> Duration {
        backoff.delay(attempt: retry, random: random)
    }

    /// The pause before retry number `retry`, with fresh randomness.
    public func delay(beforeRetry retry: Int) -> Duration {
        delay(beforeRetry: retry, random: Double.random(in: 0..<1))
    }
}
