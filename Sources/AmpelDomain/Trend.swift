/// Where a district's incidence is heading: the change against a week earlier and the last
/// two weeks of values (docs/signal.md, `trend`).
public struct Trend: Sendable, Hashable {
    public enum Direction: String, Sendable, Hashable {
        case rising, falling, steady
    }

    /// Days in ``series``.
    public static let days = 14
    /// A change of at most this many percent either way is `steady`.
    public static let steadyPercent = 5.0

    /// The percent change of the latest value against the value 7 days earlier, to one decimal.
    public let change7: Double
    public let direction: Direction
    /// The last ``days`` daily values, oldest first; the last is the signal's `incidence`.
    public let series: [Double]

    /// The trend of 14 consecutive daily values (oldest first); `nil` for any other count or
    /// when the value 7 days before the latest is 0 (no percent change can be given).
    public init?(series: [Double]) {
        guard series.count == Self.days else { return nil }
        let latest = series[Self.days - 1]
        let weekBefore = series[Self.days - 8]
        guard weekBefore > 0, latest.isFinite, weekBefore.isFinite else { return nil }
        // Rounded first, so that the direction agrees with the figure a reader sees.
        let change = ((latest - weekBefore) / weekBefore * 1000).rounded() / 10
        self.change7 = change == 0 ? 0 : change  // no "-0"
        self.direction = change > Self.steadyPercent ? .rising : change < -Self.steadyPercent ? .falling : .steady
        self.series = series
    }
}
