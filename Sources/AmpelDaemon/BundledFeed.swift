import AmpelData
import AmpelDomain

/// Bundled data as a ``DatasetFeed``: one publication, never stale, never refreshed.
///
/// A replay of 2020 is not "old data" in the sense of `data.max_age`: it is the data the
/// user asked for, so it is never flagged stale.
public struct BundledFeed: DatasetFeed {
    public let dataset: Dataset

    public init(source: DaemonConfiguration.DataSource, date: Day?) throws {
        switch source {
        case .history: dataset = try BundledData.shared.history(on: date)
        case .snapshot, .rki: dataset = try BundledData.shared.snapshot(on: date)
        }
    }

    public init(dataset: Dataset) {
        self.dataset = dataset
    }

    public func initial() async throws -> FeedState {
        FeedState(dataset: dataset, stale: false)
    }

    public func updates() -> AsyncStream<FeedState> {
        // Nothing ever changes; the stream ends when the consuming task is cancelled.
        AsyncStream { _ in }
    }
}
