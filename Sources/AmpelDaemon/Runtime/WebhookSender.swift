import AmpelData
import Logging
import NIOCore
import Synchronization

/// One webhook's queue and the task that empties it: each alert POSTed once it is 2xx, with
/// retries and backoff, one at a time and in order.
///
/// The daemon's loop only calls ``offer(_:)``, which takes a lock for an append and never
/// waits: a slow or dead endpoint fills its own queue, and what does not fit is counted and
/// dropped, so neither the MQTT path nor the other webhooks notice it (docs/webhooks.md).
///
/// ```swift
/// let sender = WebhookSender(name: "phone", capacity: 1000, retry: WebhookSender.retry, logger: logger) { delivery in
///     await client.post(delivery)
/// }
/// Task { await sender.run() }
/// sender.offer(.init(alertID: "3f9c0a5e21b7d864-7", payload: body))
/// ```
final class WebhookSender: Sendable {
    /// One alert for this webhook.
    struct Delivery: Sendable, Hashable {
        /// The alert's `id` (``AlertIDs``), sent as the `Idempotency-Key` at every attempt.
        var alertID: String
        var payload: [UInt8]
    }

    /// How one POST ended.
    enum Attempt: Sendable, Hashable {
        case delivered
        /// `retryable`: a timeout, a connection error, 408, 429 or 5xx; another answer (4xx)
        /// will not change by asking again.
        case failed(reason: String, retryable: Bool)
    }

    typealias Stats = WebhookCounters

    /// Five attempts, 1, 2, 4, 8 s apart (each minus up to half of it): an endpoint that
    /// restarts (a container update) has about 15 s to come back before an alert is given up.
    static let retry = RetryPolicy(maxAttempts: 5, baseDelay: .seconds(1), maxDelay: .seconds(30), jitter: 0.5)

    /// Whether an HTTP status is worth asking again for: 408 (the server timed out), 429
    /// (rate limit) and every 5xx. Other 4xx (a wrong token, a bad body) fail the same way again.
    static func isRetryable(status: Int) -> Bool {
        status == 408 || status == 429 || status >= 500
    }

    let name: String
    /// Deliveries that may wait; more are dropped (and counted).
    let capacity: Int
    private let retry: RetryPolicy
    private let logger: Logger
    private let post: @Sendable (Delivery) async -> Attempt

    private struct State {
        var queue = CircularBuffer<Delivery>()
        var waiter: CheckedContinuation<Void, Never>?
        /// A retry's pause that ``finish()`` ends (``pause(_:untilFinish:)``).
        var pauseWaiter: CheckedContinuation<Void, Never>?
        var finished = false
        var stats = Stats()
        var dropLog = RateLimiter(interval: 10, burst: 5)

        var count: Int { queue.count }

        mutating func popFirst() -> Delivery? { queue.popFirst() }
    }

    private let state = Mutex(State())

    init(name: String, capacity: Int, retry: RetryPolicy, logger: Logger, post: @escaping @Sendable (Delivery) async -> Attempt) {
        self.name = name
        self.capacity = max(1, capacity)
        self.retry = retry
        self.logger = logger
        self.post = post
    }

    var stats: Stats {
        state.withLock { state in
            var stats = state.stats
            stats.queued = state.count
            return stats
        }
    }

    /// Queues a delivery without waiting; `false` when the queue is full (counted, logged at
    /// a limited rate) or the sender has finished.
    @discardableResult
    func offer(_ delivery: Delivery, now: Double = 0) -> Bool {
        let (accepted, waiter, log) = state.withLock { state -> (Bool, CheckedContinuation<Void, Never>?, (log: Bool, suppressed: Int)?) in
            guard !state.finished else { return (false, nil, nil) }
            guard state.count < capacity else {
                state.stats.droppedQueueFull += 1
                return (false, nil, state.dropLog.admit(now: now))
            }
            state.queue.append(delivery)
            let waiter = state.waiter
            state.waiter = nil
            return (true, waiter, nil)
        }
        waiter?.resume()
        if let log, log.log {
            logger.warning("webhook queue full; alert dropped", metadata: [
                "webhook": "\(name)", "capacity": "\(capacity)", "alert": "\(delivery.alertID)", "suppressed": "\(log.suppressed)",
            ])
        }
        return accepted
    }

    /// No more deliveries are taken; ``run()`` returns once the queue is empty.
    func finish() {
        let (waiter, pauseWaiter) = state.withLock { state in
            state.finished = true
            defer { (state.waiter, state.pauseWaiter) = (nil, nil) }
            return (state.waiter, state.pauseWaiter)
        }
        waiter?.resume()
        pauseWaiter?.resume()
    }

    /// Delivers until ``finish()`` and an empty queue, or until the task is cancelled.
    /// - Returns: the deliveries left undelivered (cancelled in flight, or still queued).
    @discardableResult
    func run() async -> Int {
        while let delivery = await next() {
            let delivered = await deliver(delivery)
            if Task.isCancelled {
                return state.withLock { $0.count } + (delivered ? 0 : 1)
            }
        }
        return state.withLock { $0.count }
    }

    private func next() async -> Delivery? {
        while true {
            let (delivery, finished) = state.withLock { state in (state.popFirst(), state.finished) }
            if let delivery { return delivery }
            if finished || Task.isCancelled { return nil }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if state.count > 0 || state.finished { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    private enum PauseEnd { case elapsed, finished, cancelled }

    /// The backoff before a retry; with `untilFinish`, ``finish()`` (or having finished) ends it.
    private func pause(_ delay: Duration, untilFinish: Bool) async -> PauseEnd {
        let retry = self.retry
        @Sendable func sleep() async -> PauseEnd {
            do { try await retry.sleep(delay) } catch { return .cancelled }
            return .elapsed
        }
        guard untilFinish else { return await sleep() }
        return await withTaskGroup(of: PauseEnd.self) { group in
            group.addTask { await sleep() }
            group.addTask { await self.finishing() ? .finished : .cancelled }
            let first = await group.next() ?? .cancelled
            group.cancelAll()
            return first
        }
    }

    /// Until ``finish()``: `true`, or `false` when the task is cancelled first.
    private func finishing() async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.finished || Task.isCancelled { return true }
                    state.pauseWaiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
            return state.withLock { $0.finished } && !Task.isCancelled
        } onCancel: {
            state.withLock { state in
                defer { state.pauseWaiter = nil }
                return state.pauseWaiter
            }?.resume()
        }
    }

    /// One alert: attempts until a 2xx, a failure not worth repeating, or the last retry.
    /// Cancelled (the stop's limit), it ends undelivered without giving up: ``run()`` counts it
    /// with what is left, and the stop logs that.
    private func deliver(_ delivery: Delivery) async -> Bool {
        var attempt = 1
        // The stop (``finish()``) cuts one pause short: the process is about to exit, and an alert
        // whose retry falls after the stop's limit is lost for sure, while one attempt now may
        // deliver it (an endpoint back from a restart). Later pauses run their course.
        var pauseCut = false
        while true {
            let outcome = await post(delivery)
            guard case .failed(let reason, let retryable) = outcome else {
                state.withLock { $0.stats.delivered += 1 }
                return true
            }
            // The POST was cut by the stop, not refused by the endpoint.
            if Task.isCancelled { return false }
            state.withLock { $0.stats.failedAttempts += 1 }
            guard retryable, attempt < retry.maxAttempts else {
                state.withLock { $0.stats.droppedGaveUp += 1 }
                logger.warning("webhook gave up on an alert", metadata: [
                    "webhook": "\(name)", "alert": "\(delivery.alertID)", "attempts": "\(attempt)", "error": "\(reason)",
                ])
                return false
            }
            let delay = retry.delay(beforeRetry: attempt)
            logger.notice("webhook POST failed, retrying", metadata: [
                "webhook": "\(name)", "alert": "\(delivery.alertID)", "attempt": "\(attempt)", "error": "\(reason)", "retryIn": "\(delay)",
            ])
            switch await pause(delay, untilFinish: !pauseCut) {
            case .elapsed: break
            case .finished: pauseCut = true
            case .cancelled: return false  // the stop's limit
            }
            attempt += 1
        }
    }
}
