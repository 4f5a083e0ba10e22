/// Lets a log line through at most `burst` times per `interval`, and says how many it held back.
///
/// Bad payloads can arrive thousands per second; the log must not grow with them.
public struct RateLimiter: Sendable {
    public let interval: Double
    public let burst: Int
    private var windowStart: Double = -.infinity
    private var inWindow = 0
    private var suppressed = 0

    public init(interval: Double = 10, burst: Int = 5) {
        self.interval = interval
        self.burst = burst
    }

    /// Whether to log now (`now` in seconds, any monotonic origin); with the number held back since the last line.
    public mutating func admit(now: Double) -> (log: Bool, suppressed: Int) {
        if now - windowStart >= interval {
            windowStart = now
            inWindow = 0
        }
        guard inWindow < burst else {
            suppressed += 1
            return (false, 0)
        }
        inWindow += 1
        let held = suppressed
        suppressed = 0
        return (true, held)
    }
}
