import AmpelDomain
import Foundation

/// Something the data layer tells the rest of Ampel.
public enum DataEvent: Sendable, Hashable {
    /// Start-up data is in force (from the cache, the bundled snapshot or a fixed source);
    /// `nil` when there is none. Always the first event.
    case loaded(origin: StartOrigin, dataset: Dataset?)
    /// A newer publication is in force. `changedDistricts` are the codes of the districts
    /// whose phase changed (or that appeared or disappeared): their signals need renewing.
    case published(previous: Dataset?, current: Dataset, changedDistricts: Set<String>)
    /// A check failed or its answer was rejected; the data in force stays.
    case failed(DataError)
    /// An attempt of the check under way failed and will be tried again
    /// (``DataStatus/retrying``); the check's outcome follows.
    case retrying(DataError)
    /// A new publication looks like a wrong release and is held back until the next check.
    case held(DataError)
    /// The source answered the publication in force (or `304 Not Modified`).
    case checked
    /// The data in force became stale (`true`) or fresh again (`false`): every signal's
    /// `stale` flag changes. Sent only on a change, after the event that caused it.
    case staleChanged(Bool)
}

/// Checks the source every ``interval`` (10 minutes by default) and reports what changed.
///
/// ```swift
/// let refresher = Refresher(store: store)
/// let task = Task { await refresher.run() }
/// for await event in refresher.events { ... }   // ends when `task` is cancelled
/// ```
///
/// ``run()`` starts the store (cache or bundled data first), checks the source at once, and
/// then every interval until its task is cancelled; then ``events`` finishes. The pause is
/// taken on an injected `Clock`, so tests advance a test clock instead of waiting.
///
/// > Note: ``events`` has a single consumer and ``run()`` is meant to be called once.
public final class Refresher: Sendable {
    /// The store this refresher updates.
    public let store: IncidenceStore
    /// The pause between two checks.
    public let interval: Duration
    /// Every event, in order; finishes when ``run()`` returns.
    public let events: AsyncStream<DataEvent>

    private let continuation: AsyncStream<DataEvent>.Continuation
    private let sleep: @Sendable (Duration) async throws -> Void
    private let now: @Sendable () -> Date

    /// - Parameters:
    ///   - interval: the pause between checks (default 10 minutes).
    ///   - clock: takes the pauses; tests pass a clock they advance by hand.
    ///   - now: the wall clock for the staleness checks.
    public init<C: Clock>(
        store: IncidenceStore,
        interval: Duration = .seconds(600),
        clock: C = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) where C.Duration == Duration {
        self.store = store
        self.interval = interval
        self.sleep = { duration in try await clock.sleep(for: duration) }
        self.now = now
        (events, continuation) = AsyncStream.makeStream(of: DataEvent.self, bufferingPolicy: .unbounded)
    }

    /// Starts the store, then checks at once and every ``interval`` until cancelled.
    public func run() async {
        defer { continuation.finish() }
        let origin = await store.start()
        continuation.yield(.loaded(origin: origin, dataset: await store.dataset))
        var stale = await store.isStale(now: now())
        while !Task.isCancelled {
            let continuation = self.continuation
            let outcome = await store.refresh(attemptFailed: { continuation.yield(.retrying($0)) })
            switch outcome {
            case .updated(let previous, let current, let changed):
                continuation.yield(.published(previous: previous, current: current, changedDistricts: changed))
            case .rejected(let error):
                if Task.isCancelled { return }
                continuation.yield(.failed(error))
            case .held(let error):
                continuation.yield(.held(error))
            case .unchanged:
                continuation.yield(.checked)
            }
            let nowStale = await store.isStale(now: now())
            if nowStale != stale {
                stale = nowStale
                continuation.yield(.staleChanged(nowStale))
            }
            do {
                try await sleep(interval)
            } catch {
                return
            }
        }
    }
}
