/// The delay before each reconnect attempt: doubling from a minimum up to a bound, with jitter.
///
/// Kept apart from the network thread so that its bounds can be tested without waiting: the
/// client asks ``delay(attempt:jitter:)`` and sleeps for the answer. The daemon's own retry of
/// the first connect uses it too.
public struct MQTTBackoff: Sendable, Hashable {
    public var minimum: Duration
    public var maximum: Duration

    public init(minimum: Duration, maximum: Duration) {
        self.minimum = minimum
        self.maximum = maximum
    }

    /// The delay before attempt `attempt` (1 = first retry): `minimum * 2^(attempt-1)`, capped at
    /// `maximum`, then scaled by `jitter` in 0.5...1.0 so that many clients restarted together do
    /// not hammer the broker in lock-step. Never below `minimum / 2`, never above `maximum`.
    public func delay(attempt: Int, jitter: Double) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let base = minimum * (1 << exponent)
        let capped = min(base, maximum)
        let factor = min(max(jitter, 0.5), 1.0)
        return capped * factor
    }
}
