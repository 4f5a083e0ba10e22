import AmpelMessages
import AmpelData
import AmpelDomain
import AmpelMQTT
import Foundation

/// The broker as the daemon uses it: subscribe, publish, receive, leave.
///
/// `AmpelMQTT.MQTTClient` conforms to it itself (`MQTTClient+DaemonTransport.swift`); keeping
/// the daemon on this small surface keeps the C library and its threads out of the signal
/// logic, and lets a test drive the daemon with a fake broker.
protocol DaemonTransport: Sendable {
    /// Hands every message of the subscriptions to `target`, in arrival order, from any thread.
    /// Called once, before ``connectToBroker()``.
    func deliver(to target: @escaping @Sendable (MQTTMessage) -> Void)
    /// Reports every accepted connection (CONNACK) to `connected`, in order, with whether the
    /// broker kept the session (the first for ``connectToBroker()``, then one per automatic
    /// reconnect), and every lost connection to `lost` (the client reconnects by itself): `nil`
    /// for the loss, then why each failed attempt to reconnect failed.
    /// Called once, before ``connectToBroker()``.
    func connections(_ connected: @escaping @Sendable (_ sessionPresent: Bool) -> Void, lost: @escaping @Sendable (_ failure: String?) -> Void)
    /// Reports every publish the broker refused (a reason code of 0x80 or above) with its
    /// topic, from any thread. Called once, before ``connectToBroker()``.
    func onPublishRefused(_ handler: @escaping @Sendable (_ topic: String, _ reason: Int) -> Void)
    /// The executor the loop prefers: the one that runs it where the messages arrive
    /// (``MQTTClient/taskExecutor``), or nil for Swift's global executor.
    var loopExecutor: (any TaskExecutor)? { get }
    /// Connects once; a failure is thrown (the daemon retries with backoff).
    func connectToBroker() async throws
    /// Subscribes to `filters` with `qos`: QoS 1 for the inputs (the session keeps their
    /// messages while the daemon is away), QoS 0 for reading retained messages back.
    func subscribe(_ filters: [String], qos: MQTTQoS) async throws
    /// Subscribes to `filters` at QoS 1 in one request, and answers for each what the broker
    /// granted or why it refused (the inputs: a refused one is named, the others serve).
    func subscribeAnswers(_ filters: [String]) async throws -> [MQTTSubscriptionAnswer]
    /// Removes subscriptions (the daemon's own, temporary ones).
    func unsubscribe(_ filters: [String]) async throws
    /// Publishes; for QoS 1 returns when the broker has acknowledged.
    func publish(_ message: OutgoingMessage) async throws(MQTTError)
    /// Hands a publish over in call order without waiting for the acknowledgement (the hot
    /// path; it never suspends, so the daemon's handling of one input is never interleaved),
    /// and reports the broker's answer to `acknowledged` (`nil`: taken; else why not), from any
    /// thread, once.
    func enqueue(_ message: OutgoingMessage, acknowledged: (@Sendable (MQTTError?) -> Void)?) throws(MQTTError)
    /// Publishes handed over that the broker has not acknowledged yet (held in memory for it).
    var unanswered: Int { get }
    /// Returns once at most `target` publishes are unanswered (or the transport is closed).
    func waitForAnswers(atMost target: Int) async
    /// Stops taking messages from the broker (it keeps them) until ``resumeReading()``.
    func pauseReading()
    func resumeReading()
    /// Leaves the broker: with `clean`, a DISCONNECT (the Will is not fired); otherwise the
    /// connection is dropped so that the broker publishes the Will (the goodbye was not
    /// acknowledged, so only the Will can still say `offline`).
    func shutdown(clean: Bool) async
    /// The broker of the current or last connection (`host:port`), for `bridge/info`.
    var brokerInUse: String? { get }
    /// Connections made to another broker of the list than the one before.
    var failovers: Int { get }
}

extension DaemonTransport {
    var brokerInUse: String? { nil }
    var loopExecutor: (any TaskExecutor)? { nil }
    var failovers: Int { 0 }
    /// A transport that hands every publish over at once holds none for the broker.
    var unanswered: Int { 0 }
    func waitForAnswers(atMost target: Int) async {}

    /// Subscribes to `filters` with QoS 1.
    func subscribe(_ filters: [String]) async throws {
        try await subscribe(filters, qos: .atLeastOnce)
    }
}

/// Finds the district of a position.
protocol Locator: Sendable {
    /// The German district at the position, as the engine keeps and publishes a district;
    /// `nil` in no German district.
    func place(latitude: Double, longitude: Double) -> Signal.DistrictRef?
}

/// What kind of data is in force, as the page's badge, `bridge/info` and `/readyz` name it.
enum DataKind: String, Sendable, Hashable {
    /// Fetched from the live source (in this run, or its cache from an earlier one).
    case live
    /// The bundled snapshot standing in for a live source that has not answered yet.
    case standIn = "stand-in"
    /// A bundled snapshot chosen by `--source snapshot`.
    case snapshot
    /// The bundled daily history (`--source history`).
    case history
    /// `ampel replay`'s walk through the history.
    case replay
}

/// The dataset in force and how fresh it is.
package struct FeedState: Sendable, Hashable {
    var dataset: Dataset
    var kind: DataKind
    var stale: Bool
    /// When the source was last asked (`nil` for bundled data).
    var lastFetch: Date?
    /// Why the last fetch failed, `nil` after a success.
    var lastError: String?
    /// What the data layer counted, when it was last asked, and a publication it holds back.
    var status: FeedStatus?

    init(dataset: Dataset, kind: DataKind = .snapshot, stale: Bool, lastFetch: Date? = nil, lastError: String? = nil,
                status: FeedStatus? = nil) {
        self.kind = kind
        self.status = status
        self.dataset = dataset
        self.stale = stale
        self.lastFetch = lastFetch
        self.lastError = lastError
    }
}

/// The data layer's own account of a live source, for `bridge/info`, `/readyz` and `/metrics`.
struct FeedStatus: Sendable, Hashable {
    var counters: DataCounters
    /// When the source was last asked, whatever came back.
    var lastCheck: Date?
    /// Why a new publication is held back, while it is.
    var held: String?

    init(counters: DataCounters, lastCheck: Date?, held: String?) {
        self.counters = counters
        self.lastCheck = lastCheck
        self.held = held
    }
}

/// The incidence data as the daemon uses it: the dataset in force, and what each refresh brought.
package protocol DatasetFeed: Sendable {
    /// The dataset to start with (cache, bundled, or a first fetch).
    func initial() async throws -> FeedState
    /// One state per refresh (every `data.refresh` seconds), until the task is cancelled.
    ///
    /// A state with the same dataset and staleness is fine: the engine publishes only changes.
    func updates() -> AsyncStream<FeedState>
}
