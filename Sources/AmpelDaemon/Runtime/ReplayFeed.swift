import AmpelData
import AmpelDomain
import Foundation

/// The bundled daily history as the daemon's ``DatasetFeed``, one publication day every
/// ``daySeconds`` on an injected clock: `ampel replay`.
///
/// Each day's dataset carries the courses of its districts walked from the first bundled
/// day, exactly as `--source history` on that day; its `source` is `replay`, so `bridge/info`
/// names it. Nothing is stale: the days are what the user asked for. After the last day the
/// feed stays on it until the daemon stops.
package final class ReplayFeed: DatasetFeed {
    let days: [Day]
    let daySeconds: Duration
    let ruleSet: RuleSet
    let sleep: @Sendable (Duration) async throws -> Void

    /// - Parameters:
    ///   - from: the first day (default: the first bundled day).
    ///   - to: the last day (default: the last bundled day).
    ///   - clock: takes the pause between two days; tests pass one they advance.
    /// - Throws: ``DataError`` `notAvailable` when no bundled day lies between `from` and `to`.
    package init(from: Day?, to: Day?, daySeconds: Duration, ruleSet: RuleSet,
                clock: some Clock<Duration> = ContinuousClock()) throws(DataError) {
        let all: [Day]
        if ruleSet.readsStateIndicators {
            // Every day of the bundled hospital and intensive-care files.
            let indicators = try StateIndicators.bundled()
            guard let oldest = indicators.oldestDay, let newest = indicators.newestDay else { throw DataError(.empty, "no bundled state indicators") }
            all = (oldest.daysSinceEpoch...newest.daysSinceEpoch).map(Day.init(daysSinceEpoch:))
        } else {
            all = BundledData.shared.historyDays
        }
        let first = from ?? all[0]
        let last = to ?? all[all.count - 1]
        days = all.filter { $0 >= first && $0 <= last }
        guard !days.isEmpty else {
            throw DataError(.notAvailable, "no bundled day from \(first) to \(last); the history covers \(all[0]) to \(all[all.count - 1])")
        }
        self.daySeconds = daySeconds
        self.ruleSet = ruleSet
        sleep = { try await clock.sleep(for: $0) }
    }

    /// The state of day number `index`.
    func state(_ index: Int) throws(DataError) -> FeedState {
        if ruleSet.readsStateIndicators {
            let day = try BundledIndicatorSource(day: days[index], region: ruleSet.region).publication(ruleSet: ruleSet, source: "replay")
            return FeedState(dataset: day, kind: .replay, stale: false)
        }
        let dataset = try BundledData.shared.history(on: days[index], ruleSet: ruleSet)
        return FeedState(dataset: Dataset(date: dataset.date, source: "replay", districts: dataset.districts, courses: dataset.courses), kind: .replay,
                         stale: false)
    }

    package func initial() async throws -> FeedState {
        try state(0)
    }

    package func updates() -> AsyncStream<FeedState> {
        let (stream, continuation) = AsyncStream.makeStream(of: FeedState.self, bufferingPolicy: .unbounded)
        let task = Task { [self] in
            for index in days.indices.dropFirst() {
                do { try await sleep(daySeconds) } catch { break }
                do { continuation.yield(try state(index)) } catch { break }
            }
            // The last day stays in force; the stream ends when the daemon stops.
            while !Task.isCancelled {
                do { try await sleep(.seconds(3600)) } catch { break }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
