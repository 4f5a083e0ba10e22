@testable import AmpelDaemon
import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Logging
import Synchronization
import Testing

// `notify.webhooks`: the configuration, the engine's choice of webhooks and language, the
// sender's queue and retries, and real POSTs to a loopback server.

@Suite("Webhooks: configuration")
struct WebhookConfigurationTests {
    func load(_ yaml: String) throws(ConfigurationError) -> DaemonConfiguration {
        try DaemonConfiguration.load(yaml: yaml, environment: [:], flags: .init())
    }

    func error(_ yaml: String) -> ConfigurationError? {
        do {
            _ = try load(yaml)
            return nil
        } catch {
            return error
        }
    }

    @Test("a full list: names, headers in order, language, device and district filters; no filter means every alert")
    func reads() throws {
        let config = try load("""
        notify:
          webhooks:
            - url: https://ntfy.example/ampel?tpl=1
              name: phone
              headers:
                Title: Ampel
                Authorization: Bearer tk_123
              language: de
              devices: [alice/phone, bob/car]
            - url: http://gotify.local:8080/message?token=abc
              districts: "09162"
            - url: http://hook.local/all
            - url: http://hook.local/devices
              devices: all
        """)
        let hooks = config.notify.webhooks
        try #require(hooks.count == 4)
        #expect(hooks[0].name == "phone")
        #expect(hooks[0].headers == [.init(name: "Title", value: "Ampel"), .init(name: "Authorization", value: "Bearer tk_123")])
        #expect(hooks[0].language == .de)
        #expect(hooks[0].wants(device: "alice/phone") && hooks[0].wants(device: "bob/car") && !hooks[0].wants(device: "eve/phone"))
        #expect(!hooks[0].wants(district: "09162"))
        #expect(hooks[1].name == "1" && hooks[1].language == nil)
        #expect(hooks[1].wants(district: "09162") && !hooks[1].wants(district: "09171") && !hooks[1].wants(device: "alice/phone"))
        #expect(hooks[2].wants(device: "anyone") && hooks[2].wants(district: "09171"))
        #expect(hooks[3].wants(device: "anyone") && !hooks[3].wants(district: "09171"))
    }

    @Test("bad webhooks name the key and the line", arguments: [
        ("notify:\n  webhooks:\n    - url: ftp://host/x\n", "notify.webhooks[0].url", 3, "http"),
        ("notify:\n  webhooks:\n    - name: a\n", "notify.webhooks[0].url", 3, "missing"),
        ("notify:\n  webhooks:\n    - url: http://h/\n      headers:\n        \"Bad Name\": x\n", "notify.webhooks[0].headers.Bad Name", 5, "header name"),
        ("notify:\n  webhooks:\n    - url: http://h/\n      headers:\n        Content-Length: \"3\"\n", "notify.webhooks[0].headers.Content-Length", 5, "set by Ampel"),
        ("notify:\n  webhooks:\n    - url: http://h/\n      headers:\n        X-A: a\n        x-a: b\n", "notify.webhooks[0].headers.x-a", 6, "twice"),
        ("notify:\n  webhooks:\n    - url: http://h/\n      districts: [\"09162\", \"9162\"]\n", "notify.webhooks[0].districts[1]", 4, "district code"),
        ("notify:\n  webhooks:\n    - url: http://h/\n      devices: [\"alice/#\"]\n", "notify.webhooks[0].devices[0]", 4, "device key"),
        ("notify:\n  webhooks:\n    - url: http://h/\n      language: fr\n", "notify.webhooks[0].language", 4, "language"),
        ("notify:\n  webhooks:\n    - url: http://h/\n      tokn: x\n", "notify.webhooks[0].tokn", 4, "unknown key"),
        ("notify:\n  webhooks:\n    - url: http://h/a\n    - url: http://h/b\n      name: \"0\"\n", "notify.webhooks[1].name", 5, "second webhook"),
        ("notify:\n  webhook: []\n", "notify.webhook", 2, "unknown key"),
    ])
    func rejects(_ yaml: String, key: String, line: Int, message: String) throws {
        let error = try #require(self.error(yaml))
        #expect(error.key == key)
        #expect(error.line == line)
        #expect(error.message.contains(message), "\(error)")
    }
}

@Suite("Webhooks: the engine")
struct WebhookEngineTests {
    static let hooks = [
        WebhookSettings(name: "alice-de", url: "http://h/a", language: .de, devices: .only(["alice/phone"]), districts: .none),
        WebhookSettings(name: "munich", url: "http://h/m", devices: .none, districts: .only(["09162"])),
        WebhookSettings(name: "all", url: "http://h/all"),
    ]

    func engine(_ dataset: Dataset = Fixtures.october) -> SignalEngine {
        var settings = Fixtures.settings(discovery: false)
        settings.webhooks = Self.hooks
        var engine = SignalEngine(settings: settings, dataset: dataset, stale: false)
        _ = engine.event(.start)
        return engine
    }

    func notified(_ actions: [SignalEngine.Action]) -> [(webhook: Int, body: [String: Any])] {
        actions.steps.compactMap { step in
            guard case .notify(let webhook, let payload) = step,
                  let body = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else { return nil }
            return (webhook, body)
        }
    }

    @Test("a device alert goes to the webhooks that want the device, each in its language, right after the MQTT alert")
    func deviceAlert() throws {
        var engine = engine()
        let fix = LocationFix(device: "alice/phone", latitude: 48.137, longitude: 11.575, tst: 1000, lang: "en")
        let actions = engine.event(.fix(fix, place: Fixtures.muenchen, receivedAt: 1000))
        let sent = notified(actions)
        #expect(sent.map(\.webhook) == [0, 2])
        let german = try #require(sent.first?.body), english = try #require(sent.last?.body)
        #expect(german["lang"] as? String == "de")
        #expect((german["title"] as? String)?.hasPrefix("Rot") == true, "\(german)")
        #expect(english["lang"] as? String == "en")
        #expect(german["device"] as? String == "alice/phone" && german["to"] as? String == "red" && german["from"] is NSNull)
        #expect(german["priority"] as? Int == 7)
        #expect((german["message"] as? String)?.contains("alice/phone") == true)
        // The MQTT alert's keys, plus `message` and `priority`.
        let alert = try actions.json("ampel/device/alice/phone/alert")
        #expect(Set(english.keys) == Set(alert.keys).union(["message", "priority"]))
        // Each one follows its alert, before the witness (the state).
        let steps = actions.steps
        let alertIndex = try #require(steps.firstIndex { if case .publish(_, .deviceAlert) = $0 { true } else { false } })
        let stateIndex = try #require(steps.firstIndex { if case .publish(_, .deviceState) = $0 { true } else { false } })
        let notifyIndexes = steps.indices.filter { if case .notify = steps[$0] { true } else { false } }
        #expect(notifyIndexes.allSatisfy { $0 > alertIndex && $0 < stateIndex })
    }

    @Test("another device: only the webhook for everything; no phase change: no webhook")
    func filters() {
        var engine = engine()
        let bob = LocationFix(device: "bob/car", latitude: 48.137, longitude: 11.575, tst: 1000, lang: nil)
        #expect(notified(engine.event(.fix(bob, place: Fixtures.muenchen, receivedAt: 1000))).map(\.webhook) == [2])
        let again = LocationFix(device: "bob/car", latitude: 48.138, longitude: 11.576, tst: 1001, lang: nil)
        #expect(notified(engine.event(.fix(again, place: Fixtures.muenchen, receivedAt: 1001))).isEmpty)
    }

    @Test("a district alert goes to the webhooks that want the district")
    func districtAlert() throws {
        var engine = engine()
        let (actions, _) = engine.followingReevaluation(engine.event(.data(Fixtures.november, stale: false)))
        let sent = notified(actions)
        // Every district that changed goes to "all"; SK München's to "munich" as well; none to alice's.
        let districtAlerts = actions.published.filter { $0.topic.hasPrefix("ampel/district/") && $0.topic.hasSuffix("/alert") }
        #expect(sent.filter { $0.webhook == 2 }.count == districtAlerts.count)
        let munich = sent.filter { $0.webhook == 1 }
        try #require(munich.count == 1)
        #expect((munich[0].body["district"] as? [String: Any])?["ags"] as? String == "09162")
        #expect(munich[0].body["device"] is NSNull && munich[0].body["to"] as? String == "darkred" && munich[0].body["priority"] as? Int == 8)
        #expect(!sent.contains { $0.webhook == 0 })
    }
}

/// A stand-in endpoint for the sender: each POST waits until the test answers it.
final class ScriptedEndpoint: Sendable {
    private let calls = Watched<[WebhookSender.Delivery]>([])
    private let answers = Mutex<[CheckedContinuation<WebhookSender.Attempt, Never>]>([])

    func post(_ delivery: WebhookSender.Delivery) async -> WebhookSender.Attempt {
        await withCheckedContinuation { continuation in
            answers.withLock { $0.append(continuation) }
            calls.update { $0.append(delivery) }
        }
    }

    var received: [WebhookSender.Delivery] { calls.value }

    func awaitCalls(_ count: Int) async throws {
        let calls = self.calls
        try await withTimeout(.seconds(30), "\(count) POSTs") { await calls.wait { $0.count >= count } }
    }

    /// Answers the oldest open POST.
    func answer(_ attempt: WebhookSender.Attempt) {
        answers.withLock { $0.removeFirst() }.resume(returning: attempt)
    }
}

@Suite("Webhooks: queue and retries")
struct WebhookSenderTests {
    /// Records the pauses instead of waiting them.
    final class Pauses: Sendable {
        let taken = Mutex<[Duration]>([])
        var policy: RetryPolicy {
            var policy = WebhookSender.retry
            policy.sleep = { [self] delay in taken.withLock { $0.append(delay) } }
            return policy
        }
    }

    /// The sender's end; a sender that keeps posting (a broken bound) fails the test instead of hanging it.
    static func end(_ run: Task<Int, Never>) async throws -> Int {
        defer { run.cancel() }
        return try await withTimeout(.seconds(30), "the sender to finish") { await run.value }
    }

    @Test("backoff: 1, 2, 4, 8 s before the retries, each shortened by at most half; five attempts in all")
    func backoffSchedule() {
        let policy = WebhookSender.retry
        #expect(policy.maxAttempts == 5)
        let full = (1...4).map { policy.delay(beforeRetry: $0, random: 0) }
        #expect(full == [.seconds(1), .seconds(2), .seconds(4), .seconds(8)])
        let shortest = (1...4).map { policy.delay(beforeRetry: $0, random: 1) }
        #expect(shortest == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4)])
    }

    @Test("408, 429 and 5xx are retried; other 4xx are not", arguments: [
        (408, true), (429, true), (500, true), (502, true), (503, true), (504, true),
        (400, false), (401, false), (403, false), (404, false), (410, false), (422, false),
    ])
    func retryableStatus(_ status: Int, retryable: Bool) {
        #expect(WebhookSender.isRetryable(status: status) == retryable)
    }

    @Test("the queue holds `capacity` alerts beside the one in flight; more are dropped and counted, the rest delivered in order")
    func queueBound() async throws {
        let endpoint = ScriptedEndpoint()
        let sender = WebhookSender(name: "slow", capacity: 3, retry: WebhookSender.retry, logger: Logger(label: "test")) { await endpoint.post($0) }
        let run = Task { await sender.run() }
        #expect(sender.offer(.init(alertID: "1", payload: [1])))
        try await endpoint.awaitCalls(1)
        let accepted = (2...6).map { sender.offer(.init(alertID: "\($0)", payload: [UInt8($0)])) }
        #expect(accepted == [true, true, true, false, false])
        #expect(sender.stats.droppedQueueFull == 2)
        #expect(sender.stats.queued == 3)
        for count in 1...4 {
            try await endpoint.awaitCalls(count)
            endpoint.answer(.delivered)
        }
        sender.finish()
        #expect(try await Self.end(run) == 0)
        #expect(endpoint.received.map(\.alertID) == ["1", "2", "3", "4"])
        let stats = sender.stats
        #expect(stats.delivered == 4 && stats.droppedQueueFull == 2 && stats.queued == 0 && stats.failedAttempts == 0)
    }

    @Test("a retryable failure is tried again with the same alert after the backoff; the last failure gives up, and the next alert goes")
    func retriesThenGivesUp() async throws {
        let endpoint = ScriptedEndpoint()
        let pauses = Pauses()
        let sender = WebhookSender(name: "flaky", capacity: 10, retry: pauses.policy, logger: Logger(label: "test")) { await endpoint.post($0) }
        let run = Task { await sender.run() }
        sender.offer(.init(alertID: "1", payload: [1]))
        sender.offer(.init(alertID: "2", payload: [2]))
        for count in 1...5 {
            try await endpoint.awaitCalls(count)
            endpoint.answer(.failed(reason: "HTTP 503", retryable: true))
        }
        try await endpoint.awaitCalls(6)
        endpoint.answer(.delivered)
        sender.finish()
        _ = try await Self.end(run)
        #expect(endpoint.received.map(\.alertID) == ["1", "1", "1", "1", "1", "2"])
        let taken = pauses.taken.withLock { $0 }
        #expect(taken.count == 4)
        for (index, pause) in taken.enumerated() {
            let full = Duration.seconds(1 << index)
            #expect(pause <= full && pause >= full / 2, "pause \(index + 1): \(pause)")
        }
        let stats = sender.stats
        #expect(stats.failedAttempts == 5 && stats.droppedGaveUp == 1 && stats.delivered == 1)
    }

    @Test("a failure that is not retryable (a 4xx) is given up at once")
    func noRetryFor4xx() async throws {
        let endpoint = ScriptedEndpoint()
        let pauses = Pauses()
        let sender = WebhookSender(name: "wrong-token", capacity: 10, retry: pauses.policy, logger: Logger(label: "test")) { await endpoint.post($0) }
        let run = Task { await sender.run() }
        sender.offer(.init(alertID: "1", payload: [1]))
        sender.offer(.init(alertID: "2", payload: [2]))
        try await endpoint.awaitCalls(1)
        endpoint.answer(.failed(reason: "HTTP 401", retryable: false))
        try await endpoint.awaitCalls(2)
        endpoint.answer(.delivered)
        sender.finish()
        _ = try await Self.end(run)
        #expect(endpoint.received.map(\.alertID) == ["1", "2"])
        #expect(pauses.taken.withLock { $0 }.isEmpty)
        #expect(sender.stats.droppedGaveUp == 1 && sender.stats.failedAttempts == 1 && sender.stats.delivered == 1)
    }

    @Test("a POST the stop cancels is left undelivered, not given up: no `gaveUp`, no failed attempt")
    func cancelledByTheStop() async throws {
        let endpoint = ScriptedEndpoint()
        let pauses = Pauses()
        let sender = WebhookSender(name: "slow", capacity: 10, retry: pauses.policy, logger: Logger(label: "test")) { await endpoint.post($0) }
        let run = Task { await sender.run() }
        sender.offer(.init(alertID: "1", payload: [1]))
        sender.offer(.init(alertID: "2", payload: [2]))
        try await endpoint.awaitCalls(1)
        run.cancel()
        // What `WebhookRequest` answers for a request cancelled under it.
        endpoint.answer(.failed(reason: "cancelled at stop", retryable: false))
        #expect(try await Self.end(run) == 2)
        #expect(endpoint.received.map(\.alertID) == ["1"])
        let stats = sender.stats
        #expect(stats.droppedGaveUp == 0 && stats.failedAttempts == 0 && stats.delivered == 0, "\(stats)")
    }

    @Test("a retry's pause the stop cuts short is left undelivered, not given up")
    func cancelledInTheBackoff() async throws {
        let endpoint = ScriptedEndpoint()
        var policy = WebhookSender.retry
        // The stop's limit comes during the pause: it cancels the sender's task.
        let running = Mutex<Task<Int, Never>?>(nil)
        policy.sleep = { _ in
            running.withLock { $0 }?.cancel()
            throw CancellationError()
        }
        let sender = WebhookSender(name: "flaky", capacity: 10, retry: policy, logger: Logger(label: "test")) { await endpoint.post($0) }
        let run = Task { await sender.run() }
        running.withLock { $0 = run }
        sender.offer(.init(alertID: "1", payload: [1]))
        try await endpoint.awaitCalls(1)
        endpoint.answer(.failed(reason: "HTTP 503", retryable: true))
        #expect(try await Self.end(run) == 1)
        let stats = sender.stats
        #expect(stats.droppedGaveUp == 0 && stats.failedAttempts == 1, "\(stats)")
    }

    @Test("the stop cuts a retry's pause short: the alert is tried again at once, not after the stop's limit")
    func stopCutsThePause() async throws {
        let endpoint = ScriptedEndpoint()
        var policy = WebhookSender.retry
        // A pause longer than any stop's limit: only the stop ends it.
        policy.sleep = { _ in try await Task.sleep(for: .seconds(3600)) }
        let sender = WebhookSender(name: "back", capacity: 10, retry: policy, logger: Logger(label: "test")) { await endpoint.post($0) }
        let run = Task { await sender.run() }
        defer { run.cancel() }
        sender.offer(.init(alertID: "1", payload: [1]))
        try await endpoint.awaitCalls(1)
        endpoint.answer(.failed(reason: "HTTP 503", retryable: true))
        sender.finish()
        try await endpoint.awaitCalls(2)
        endpoint.answer(.delivered)
        #expect(try await Self.end(run) == 0)
        #expect(endpoint.received.map(\.alertID) == ["1", "1"])
        let stats = sender.stats
        #expect(stats.delivered == 1 && stats.failedAttempts == 1 && stats.droppedGaveUp == 0, "\(stats)")
    }
}

@Suite("Webhooks: POSTs to a loopback server", .serialized)
struct WebhookHTTPTests {
    static func webhooks(_ server: HTTPFixtureServer, headers: [WebhookSettings.Header] = [], timeout: Duration = .seconds(10),
                         pauses: WebhookSenderTests.Pauses = .init()) -> Webhooks {
        let settings = WebhookSettings(name: "test", url: server.baseURL + "/hook?token=abc", headers: headers)
        let webhooks = Webhooks([settings], logger: Logger(label: "test"), timeout: timeout, retry: pauses.policy)
        webhooks.start()
        return webhooks
    }

    static let body = Array(#"{"title":"Rot: 7-Tage-Inzidenz über 50"}"#.utf8)

    @Test("success: one POST with the alert as its JSON body, the idempotency key, Ampel's and the configured headers")
    func success() async throws {
        let server = try await HTTPFixtureServer.start()
        let webhooks = Self.webhooks(server, headers: [.init(name: "Title", value: "Ampel"), .init(name: "User-Agent", value: "mine")])
        webhooks.send(webhook: 0, alertID: "run-42", payload: Self.body, now: 0)
        try await withTimeout(.seconds(20), "the POST") { await server.waitForDelivered(1) }
        _ = await webhooks.stop(before: .now + .seconds(5))
        try await server.shutdown()
        let post = try #require(server.delivered.first)
        #expect(server.requestCount == 1)
        #expect(post.path == "/hook" && post.query["token"] == "abc")
        #expect(post.body == Self.body)
        #expect(post.headers["content-type"] == "application/json; charset=utf-8")
        #expect(post.headers["idempotency-key"] == "run-42")
        #expect(post.headers["title"] == "Ampel")
        #expect(post.headers["user-agent"] == "mine")
        #expect(webhooks.stats["test"]?.delivered == 1)
    }

    @Test("a 500, then success: exactly one delivered POST, the retry with the same key")
    func serverErrorThenSuccess() async throws {
        let server = try await HTTPFixtureServer.start()
        server.inject(.status(500))
        let webhooks = Self.webhooks(server)
        webhooks.send(webhook: 0, alertID: "run-7", payload: Self.body, now: 0)
        try await withTimeout(.seconds(20), "the POST") { await server.waitForDelivered(1) }
        _ = await webhooks.stop(before: .now + .seconds(5))
        try await server.shutdown()
        #expect(server.requestCount == 2)
        #expect(server.delivered.count == 1)
        #expect(server.requests.allSatisfy { $0.headers["idempotency-key"] == "run-7" })
        let stats = try #require(webhooks.stats["test"])
        #expect(stats.delivered == 1 && stats.failedAttempts == 1 && stats.droppedGaveUp == 0)
    }

    @Test("no answer within the timeout: counted as a failed attempt and retried")
    func timeout() async throws {
        let server = try await HTTPFixtureServer.start()
        server.inject(.stall)
        // Long enough that a busy machine answers a POST that does not stall within it (2 s was
        // not always: a slow retry counted as a second failure).
        let webhooks = Self.webhooks(server, timeout: .seconds(5))
        webhooks.send(webhook: 0, alertID: "run-9", payload: Self.body, now: 0)
        try await withTimeout(.seconds(30), "the POST") { await server.waitForDelivered(1) }
        _ = await webhooks.stop(before: .now + .seconds(5))
        try await server.shutdown()
        #expect(server.requestCount == 2)
        let stats = try #require(webhooks.stats["test"])
        #expect(stats.delivered == 1 && stats.failedAttempts == 1)
    }

    @Test("a 4xx is not retried; the next alert goes")
    func clientError() async throws {
        let server = try await HTTPFixtureServer.start()
        server.inject(.status(401))
        let webhooks = Self.webhooks(server)
        webhooks.send(webhook: 0, alertID: "run-1", payload: Self.body, now: 0)
        webhooks.send(webhook: 0, alertID: "run-2", payload: Self.body, now: 0)
        try await withTimeout(.seconds(20), "the second POST") { await server.waitForDelivered(1) }
        _ = await webhooks.stop(before: .now + .seconds(5))
        try await server.shutdown()
        #expect(server.requests.map { $0.headers["idempotency-key"] } == ["run-1", "run-2"])
        #expect(server.delivered.map { $0.headers["idempotency-key"] } == ["run-2"])
        let stats = try #require(webhooks.stats["test"])
        #expect(stats.delivered == 1 && stats.failedAttempts == 1 && stats.droppedGaveUp == 1)
    }

    @Test("a refused connection is retried")
    func connectionRefused() async throws {
        // A port that was free a moment ago: nothing listens there now.
        let probe = try await HTTPFixtureServer.start()
        let port = probe.port
        try await probe.shutdown()
        let pauses = WebhookSenderTests.Pauses()
        let settings = WebhookSettings(name: "gone", url: "http://127.0.0.1:\(port)/hook")
        let webhooks = Webhooks([settings], logger: Logger(label: "test"), retry: pauses.policy)
        webhooks.start()
        webhooks.send(webhook: 0, alertID: "run-1", payload: Self.body, now: 0)
        _ = await webhooks.stop(before: .now + .seconds(20))
        let stats = try #require(webhooks.stats["gone"])
        #expect(stats.failedAttempts == 5 && stats.droppedGaveUp == 1 && stats.delivered == 0)
        #expect(pauses.taken.withLock { $0.count } == 4)
    }
}

@Suite("Alert ids")
struct AlertIDTests {
    @Test("a run that counts its alerts from 1 again (state.json lost) hands out ids no earlier run did; one alert keeps its id")
    func idsOfTwoRunsDiffer() {
        let first = AlertIDs(), second = AlertIDs()
        // The journal's ids 1, 2, 3 in both runs: the second one lost the snapshot that counted on.
        let firstIDs = (1...3).map { first.id($0) }
        let secondIDs = (1...3).map { second.id($0) }
        #expect(Set(firstIDs).isDisjoint(with: secondIDs))
        #expect(Set(firstIDs).count == 3)
        #expect(first.id(2) == firstIDs[1])
    }

    @Test("the id goes first into a JSON object, which stays valid JSON; anything else is left as it is")
    func stamp() throws {
        let stamped = AlertIDs.stamp(Array(#"{"from":null,"to":"red"}"#.utf8), id: "00ab-7")
        #expect(String(decoding: stamped, as: UTF8.self) == #"{"id":"00ab-7","from":null,"to":"red"}"#)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(stamped)) as? [String: Any])
        #expect(object["id"] as? String == "00ab-7" && object["to"] as? String == "red")
        #expect(String(decoding: AlertIDs.stamp(Array("{}".utf8), id: "x-1"), as: UTF8.self) == #"{"id":"x-1"}"#)
        #expect(AlertIDs.stamp(Array("red".utf8), id: "x-1") == Array("red".utf8))
        #expect(AlertIDs.stamp([], id: "x-1") == [])
    }
}
