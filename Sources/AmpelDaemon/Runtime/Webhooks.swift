import AmpelData
import Foundation
import Logging
import Synchronization

/// Every webhook of `notify.webhooks`: one ``WebhookSender`` each, one HTTP client for all.
///
/// The daemon hands each alert over with ``send(webhook:alertID:payload:)`` and never waits;
/// a stop gives what is queued until a deadline (``stop(before:)``), and the rest is lost,
/// as everything queued is at `kill -9` (docs/webhooks.md, "Restarts").
final class Webhooks: Sendable {
    /// Alerts one webhook may hold waiting. A new publication alerts every device whose phase
    /// changed at once; 1,000 covers a household's or a small fleet's burst, and a dead endpoint
    /// holds at most 1,000 payloads of about 1.5 kB.
    static let queueCapacity = 1_000
    /// How long one POST may take, from connecting to the answer's last byte.
    static let attemptTimeout: Duration = .seconds(10)

    let senders: [WebhookSender]
    private let tasks = Mutex<[Task<Int, Never>]>([])

    /// Senders that POST through `client` (the process's HTTP client by default).
    init(_ webhooks: [WebhookSettings], logger: Logger, timeout: Duration = Webhooks.attemptTimeout,
         retry: RetryPolicy = WebhookSender.retry, capacity: Int = Webhooks.queueCapacity, client: HTTPClient = .shared) {
        senders = webhooks.map { webhook in
            let request = WebhookRequest(webhook: webhook, client: client, timeout: timeout)
            return WebhookSender(name: webhook.name, capacity: capacity, retry: retry, logger: logger) { await request.post($0) }
        }
    }

    /// Starts one delivering task per webhook; alerts queued before are sent first.
    func start() {
        guard !senders.isEmpty else { return }
        let started = senders.map { sender in Task { await sender.run() } }
        tasks.withLock { $0 = started }
    }

    /// Queues an alert for webhook `index`; never waits.
    func send(webhook index: Int, alertID: String, payload: [UInt8], now: Double) {
        guard senders.indices.contains(index) else { return }
        senders[index].offer(.init(alertID: alertID, payload: payload), now: now)
    }

    /// Each webhook's counters, by name.
    var stats: [String: WebhookSender.Stats] {
        Dictionary(senders.map { ($0.name, $0.stats) }, uniquingKeysWith: { first, _ in first })
    }

    /// Takes no more alerts, delivers what is queued until `deadline`, then cancels the rest.
    /// - Returns: the alerts left undelivered, by webhook name (only those with some).
    func stop(before deadline: ContinuousClock.Instant) async -> [String: Int] {
        for sender in senders { sender.finish() }
        let running = tasks.withLock { $0 }
        let timer = Task {
            try? await Task.sleep(until: deadline)
            for task in running { task.cancel() }
        }
        var left: [String: Int] = [:]
        for (sender, task) in zip(senders, running) {
            let undelivered = await task.value
            if undelivered > 0 { left[sender.name] = undelivered }
        }
        timer.cancel()
        return left
    }
}

/// One webhook's POST: its URL, headers and the alert as the body.
struct WebhookRequest: Sendable {
    let webhook: WebhookSettings
    let client: HTTPClient
    let timeout: Duration

    static let userAgent = "ampel/\(AmpelDaemon.version) (webhook)"

    /// One attempt. A refused connection fails it at once (the sender's backoff decides when
    /// to try again); redirects are not followed (a POST turned into a GET would look delivered).
    func post(_ delivery: WebhookSender.Delivery) async -> WebhookSender.Attempt {
        var headers: [(name: String, value: String)] = [
            ("Content-Type", "application/json; charset=utf-8"),
            ("User-Agent", Self.userAgent),
            // The alert's `id`: the same at every attempt and every webhook (``AlertIDs``).
            ("Idempotency-Key", delivery.alertID),
        ]
        // A configured header replaces Ampel's own of that name (Content-Type, User-Agent).
        for header in webhook.headers {
            headers.removeAll { $0.name.caseInsensitiveCompare(header.name) == .orderedSame }
            headers.append((header.name, header.value))
        }
        let request = HTTPClient.Request(url: webhook.url, method: "POST", headers: headers, body: delivery.payload,
                                         redirects: 0, connectTimeout: timeout, timeout: timeout)
        do {
            // The answer's body is read to its end and dropped: the connection can serve the next POST.
            let head = try await client.send(request) { _, _ in }
            if head.isSuccess { return .delivered }
            return .failed(reason: "HTTP \(head.status) \(head.reason)", retryable: WebhookSender.isRetryable(status: head.status))
        } catch let error as HTTPClient.TransferError where error.kind == .timeout || error.kind == .connectTimeout {
            return .failed(reason: "no answer within \(timeout)", retryable: true)
        } catch let error as HTTPClient.TransferError where error.kind == .unusableURL {
            return .failed(reason: "'\(webhook.url)' is not a usable URL", retryable: false)
        } catch {
            if Task.isCancelled { return .failed(reason: "cancelled at stop", retryable: false) }
            return .failed(reason: "cannot reach \(DataHTTP.hostOf(webhook.url)): \(DataHTTP.cause(of: error))", retryable: true)
        }
    }
}
