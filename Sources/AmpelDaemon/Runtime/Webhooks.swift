import AmpelData
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// Every webhook of `notify.webhooks`: one ``WebhookSender`` each, one HTTP client for all.
///
/// The daemon hands each alert over with ``send(webhook:alertID:payload:)`` and never waits;
/// a stop gives what is queued until a deadline (``stop(before:)``), and the rest is lost,
/// as everything queued is at `kill -9` (docs/webhooks.md, "Restarts").
public final class Webhooks: Sendable {
    /// Alerts one webhook may hold waiting. A new publication alerts every device whose phase
    /// changed at once; 1,000 covers a household's or a small fleet's burst, and a dead endpoint
    /// holds at most 1,000 payloads of about 1.5 kB.
    static let queueCapacity = 1_000
    /// How long one POST may take to its response head; a body that stops longer than this is
    /// cut too (the client's read timeout).
    static let attemptTimeout: Duration = .seconds(10)

    let senders: [WebhookSender]
    /// This run's part of every `Idempotency-Key` (``idempotencyKey(alertID:)``).
    let keyPrefix: String
    private let timeout: Duration
    /// Made by ``start()`` and shut down by ``stop(before:)``: an `HTTPClient` must be shut
    /// down before it goes, and a daemon that never got to its loop has nothing to send.
    private let client: SharedHTTPClient
    private let tasks = Mutex<[Task<Int, Never>]>([])

    /// Senders that POST with AsyncHTTPClient.
    init(_ webhooks: [WebhookSettings], logger: Logger, timeout: Duration = Webhooks.attemptTimeout,
         retry: RetryPolicy = WebhookSender.retry, capacity: Int = Webhooks.queueCapacity,
         keyPrefix: String = Webhooks.randomKeyPrefix()) {
        let client = SharedHTTPClient()
        self.client = client
        self.timeout = timeout
        self.keyPrefix = keyPrefix
        senders = webhooks.map { webhook in
            let request = WebhookRequest(webhook: webhook, client: client, timeout: timeout, keyPrefix: keyPrefix)
            return WebhookSender(name: webhook.name, capacity: capacity, retry: retry, logger: logger) { await request.post($0) }
        }
    }

    /// Starts one delivering task per webhook; alerts queued before are sent first.
    func start() {
        guard !senders.isEmpty else { return }
        client.value.withLock { $0 = Self.makeHTTPClient(timeout: timeout) }
        let started = senders.map { sender in Task { await sender.run() } }
        tasks.withLock { $0 = started }
    }

    /// 64 random bits in hex, drawn once per run.
    static func randomKeyPrefix() -> String {
        let hex = String(UInt64.random(in: .min ... .max), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The `Idempotency-Key` of the alert with journal id `alertID`: the same at every attempt
    /// and at every webhook, and never that of another alert. The journal id alone is unique
    /// only while the snapshot lives: with a lost `state.json` the journal counts from what its
    /// remaining segments hold, and hands out ids it gave before. A restart never sends a
    /// webhook alert again, so a key needs no meaning beyond its run: a prefix drawn at each
    /// start keeps the keys of different runs apart, whatever the state directory kept.
    func idempotencyKey(alertID: UInt64) -> String {
        WebhookRequest.idempotencyKey(prefix: keyPrefix, alertID: alertID)
    }

    /// Queues an alert for webhook `index`; never waits.
    func send(webhook index: Int, alertID: UInt64, payload: [UInt8], now: Double) {
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
        if let client = client.value.withLock({ $0.take() }) { try? await client.shutdown() }
        return left
    }

    /// A refused connection fails the attempt at once (the sender's backoff decides when to
    /// try again) instead of being retried inside the client; redirects are not followed (a
    /// POST turned into a GET would look delivered).
    static func makeHTTPClient(timeout: Duration) -> HTTPClient {
        let amount = TimeAmount.nanoseconds(timeout.nanoseconds)
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: amount, read: amount))
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }
}

/// The webhooks' one HTTP client, once started.
final class SharedHTTPClient: Sendable {
    let value = Mutex<HTTPClient?>(nil)
}

/// One webhook's POST: its URL, headers and the alert as the body.
struct WebhookRequest: Sendable {
    let webhook: WebhookSettings
    let client: SharedHTTPClient
    let timeout: Duration
    let keyPrefix: String

    static let userAgent = "ampel/\(AmpelDaemon.version) (webhook)"

    static func idempotencyKey(prefix: String, alertID: UInt64) -> String {
        "\(prefix)-\(alertID)"
    }

    func post(_ delivery: WebhookSender.Delivery) async -> WebhookSender.Attempt {
        var request = HTTPClientRequest(url: webhook.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        request.headers.add(name: "User-Agent", value: Self.userAgent)
        request.headers.add(name: "Idempotency-Key", value: Self.idempotencyKey(prefix: keyPrefix, alertID: delivery.alertID))
        // A configured header replaces Ampel's own of that name (Content-Type, User-Agent).
        for header in webhook.headers { request.headers.replaceOrAdd(name: header.name, value: header.value) }
        request.body = .bytes(ByteBuffer(bytes: delivery.payload))
        guard let client = client.value.withLock({ $0 }) else { return .failed(reason: "stopped", retryable: false) }
        do {
            let response = try await client.execute(request, deadline: .now() + .nanoseconds(timeout.nanoseconds))
            // Read the (small) answer so the connection can be used again.
            _ = try? await response.body.collect(upTo: 64 << 10)
            let status = Int(response.status.code)
            if (200..<300).contains(status) { return .delivered }
            return .failed(reason: "HTTP \(status) \(response.status.reasonPhrase)", retryable: WebhookSender.isRetryable(status: status))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            return .failed(reason: "no answer within \(timeout)", retryable: true)
        } catch let error as HTTPClientError where [.invalidURL, .emptyHost, .emptyScheme].contains(error) {
            return .failed(reason: "'\(webhook.url)' is not a usable URL", retryable: false)
        } catch {
            if Task.isCancelled { return .failed(reason: "cancelled at stop", retryable: false) }
            return .failed(reason: "cannot reach \(DataHTTP.hostOf(webhook.url)): \(DataHTTP.cause(of: error))", retryable: true)
        }
    }
}
