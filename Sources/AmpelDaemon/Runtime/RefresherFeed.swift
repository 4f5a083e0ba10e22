import AmpelData
import AmpelDomain
import Foundation

/// The data layer (``IncidenceStore`` + ``Refresher``) as the daemon's ``DatasetFeed``.
///
/// The store starts from the cache (live source) or the source itself (bundled snapshot,
/// history or both); the refresher checks again every `data.refresh`. Every event of the
/// refresher becomes one ``FeedState`` read from the store, so the daemon always sees the
/// data in force with its staleness and the last error.
final class RefresherFeed: DatasetFeed {
    let store: IncidenceStore
    let refresher: Refresher
    let now: @Sendable () -> Date

    init(store: IncidenceStore, interval: Duration, clock: some Clock<Duration> = ContinuousClock(),
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.now = now
        refresher = Refresher(store: store, interval: interval, clock: clock, now: now)
    }

    /// A feed for the configured source: `rki` with a last-good cache in the state directory.
    static func make(_ configuration: DaemonConfiguration, ruleSet: RuleSet) throws(ConfigurationError) -> RefresherFeed {
        let data = configuration.data
        let source: any IncidenceSource
        var cache: DatasetCache?
        var history: PublicationHistory?
        var stateDirectory = URL(fileURLWithPath: configuration.stateDirectory)
        if ruleSet.readsStateIndicators {
            switch data.source {
            case .rki:
                source = RKIIndicatorClient(configuration: .init(
                    hospitalisationURL: data.hospitalisationURL ?? RKIIndicatorClient.defaultHospitalisationURL,
                    icuURL: data.icuURL ?? RKIIndicatorClient.defaultICUURL, region: ruleSet.region, windowDays: data.history))
            case .bundled, .snapshot:
                source = BundledIndicatorSource(day: data.date, region: ruleSet.region, window: data.history)
            case .history, .arcgis:
                throw ConfigurationError(key: "data.source", line: nil, message: "rule set '\(ruleSet.id)' reads hospital and intensive-care indicators, which '\(data.source.rawValue)' does not have: use bundled or rki")
            }
            // Apart from the incidence data's, so that changing the rule set never starts from the other kind.
            stateDirectory = StateIndicators.cacheDirectory(in: stateDirectory)
        } else {
        switch data.source {
        case .rki:
            source = RKIDatasetClient(configuration: .init(url: data.url ?? RKIDatasetClient.defaultURL, windowDays: data.history,
                                                           region: ruleSet.region))
        case .arcgis:
            source = ArcGISClient(configuration: ArcGISClient.Configuration(url: data.url ?? ArcGISClient.defaultURL,
                                                                            minimumDistricts: ruleSet.region.districtCount,
                                                                            region: ruleSet.region))
        case .snapshot:
            source = SnapshotSource(day: data.date)
        case .history:
            source = BundledSource(day: data.date, .history)
        case .bundled:
            source = BundledSource(day: data.date)
        }
        }
        if source.isLive {
            cache = DatasetCache(directory: stateDirectory)
            history = PublicationHistory(directory: stateDirectory, length: data.history)
        }
        // A fresh install starts from the bundled data of the same kind until the first answer.
        let region = ruleSet.region
        let indicators = ruleSet.readsStateIndicators
        let fallback = { @Sendable () throws(DataError) -> Dataset in
            indicators ? try BundledIndicatorSource(region: region).load() : try BundledData.shared.snapshot()
        }
        let store = IncidenceStore(source: source, cache: cache, ruleSet: ruleSet, region: region, maximumAge: data.maxAge,
                                   fallback: fallback, history: history, historyLength: data.history,
                                   releaseGuard: data.releaseGuard)
        return RefresherFeed(store: store, interval: data.refresh)
    }

    func state() async -> FeedState? {
        let status = await store.status(now: now())
        guard let dataset = status.dataset else { return nil }
        let lastFetch = [status.lastSuccess, status.lastErrorAt, status.retrying == nil ? nil : status.lastCheck].compactMap { $0 }.max()
        let live = store.source.isLive
        let feed = live ? FeedStatus(counters: status.counters, lastCheck: status.lastCheck, held: status.held?.message) : nil
        let kind: DataKind = live ? (status.standIn ? .standIn : .live) : store.source.name.hasPrefix("history") ? .history : .snapshot
        // A failed attempt that is being retried is said at once; the check's outcome replaces it.
        let lastError = status.retrying?.message ?? (status.failedSinceSuccess ? status.lastError?.message : nil)
        return FeedState(dataset: dataset, kind: kind, stale: status.stale, lastFetch: lastFetch, lastError: lastError, status: feed)
    }

    func initial() async throws -> FeedState {
        await store.start()
        guard let state = await state() else {
            let reason = await store.status(now: now()).lastError?.message ?? "no data"
            throw DataError(.notAvailable, "no incidence data to start with: \(reason)")
        }
        return state
    }

    func updates() -> AsyncStream<FeedState> {
        let (stream, continuation) = AsyncStream.makeStream(of: FeedState.self, bufferingPolicy: .unbounded)
        let refresher = self.refresher
        let task = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await refresher.run() }
                group.addTask {
                    for await event in refresher.events {
                        if case .loaded = event { continue }
                        if let state = await self.state() { continuation.yield(state) }
                    }
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
