/// The pause before a retry: doubling from `minimum` up to `maximum`, with a random share cut
/// off so that many clients that failed together do not retry in lock-step.
///
/// The one backoff of the project: the MQTT client's reconnects, the daemon's first connect,
/// the data sources' and the webhooks' retries (``delay(attempt:random:)`` is pure: the caller
/// draws the random number, so tests ask for exact pauses).
public struct Backoff: Sendable, Hashable {
    public var minimum: Duration
    public var maximum: Duration
    /// The share of each pause that is random, `0...1`: `0.5` waits between 50 % and 100 %
    /// of the doubled pause.
    public var jitter: Double

    public init(minimum: Duration, maximum: Duration, jitter: Double = 0.5) {
        self.minimum = minimum
        self.maximum = maximum
        self.jitter = min(1, max(0, jitter))
    }

    /// The pause before attempt `attempt` (1: the first retry): `minimum * 2^(attempt-1)`, at
    /// most `maximum`, shortened by `jitter * random` of itself (`random` in `0..<1`).
    public func delay(attempt: Int, random: Double) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        var pause = minimum * (1 << exponent)
        if pause > maximum || pause < .zero { pause = maximum }
        return pause * (1 - jitter * min(max(random, 0), 1))
    }
}
