import Logging

/// Lets a log line through at most `burst` times per `interval`, and says how many it held back.
///
/// Bad payloads can arrive thousands per second; the log must not grow with them. A window
/// opens at the first line after the last one ended and lasts `interval`: its first `burst`
/// lines go out, the rest are counted. The count is reported once the window is over, by
/// ``heldBack(now:)`` (the daemon asks at every tick), or else by the next line admitted
/// after the window.
///
/// Pure: the time comes in as `now` (seconds, any monotonic origin), so tests drive it
/// without a clock or a log.
struct RateLimiter: Sendable, Hashable {
    let interval: Double
    let burst: Int
    private var windowStart: Double = -.infinity
    private var inWindow = 0
    /// Lines held back in the current window, or in an ended one not yet reported.
    private var held = 0

    init(interval: Double = 10, burst: Int = 5) {
        self.interval = interval
        self.burst = max(0, burst)
    }

    /// Whether to log now; `suppressed` is the number held back in an ended window that no
    /// ``heldBack(now:)`` has reported yet (the caller says it with this line).
    mutating func admit(now: Double) -> (log: Bool, suppressed: Int) {
        var unreported = 0
        if windowEnded(at: now) {
            unreported = held
            held = 0
            windowStart = now
            inWindow = 0
        }
        guard inWindow < burst else {
            // Nothing goes out with this line: the ended window's count stays to be reported.
            held += unreported + 1
            return (false, 0)
        }
        inWindow += 1
        return (true, unreported)
    }

    /// The number of lines held back, once their window is over; `nil` while it lasts or when
    /// it held none back. Each count is returned once.
    mutating func heldBack(now: Double) -> Int? {
        guard held > 0, windowEnded(at: now) else { return nil }
        defer { held = 0 }
        return held
    }

    /// Logs the held-back count of an ended window as one warning: `message`, with `held`
    /// and the limit in its metadata. Nothing while the window lasts or when none were held.
    mutating func logHeldBack(now: Double, to logger: Logger, _ message: Logger.Message) {
        guard let count = heldBack(now: now) else { return }
        logger.warning(message, metadata: ["held": "\(count)", "limit": "\(burst) lines per \(Self.seconds(interval)) s"])
    }

    private func windowEnded(at now: Double) -> Bool {
        now - windowStart >= interval
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value))" : "\(value)"
    }
}
