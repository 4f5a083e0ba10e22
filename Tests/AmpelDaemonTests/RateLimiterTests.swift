@testable import AmpelDaemon
import Logging
import Synchronization
import Testing

/// The limiter of the daemon's warnings about dropped payloads (docs/topics.md, "Bad
/// payloads"): a burst per window, the rest counted and reported once the window is over.
/// The time is the test's; nothing is logged but where a test asks for it.
@Suite("Log rate limiter")
struct RateLimiterTests {
    @Test("6 in one second: 5 lines, and the 6th reported as held back when the window ends, without another line")
    func burstThenHeldBack() {
        var limiter = RateLimiter(interval: 10, burst: 5)
        let admitted = (0..<6).map { limiter.admit(now: 100 + Double($0) * 0.15) }
        #expect(admitted.map(\.log) == [true, true, true, true, true, false])
        #expect(admitted.map(\.suppressed) == [0, 0, 0, 0, 0, 0])
        // Asked at every tick: nothing while the window lasts.
        for tick in stride(from: 101.0, through: 109.5, by: 0.5) {
            #expect(limiter.heldBack(now: tick) == nil, "at \(tick)")
        }
        #expect(limiter.heldBack(now: 110) == 1)
        // Reported once.
        #expect(limiter.heldBack(now: 111) == nil)
        // The next window starts afresh, with nothing left to say about the last one.
        #expect(limiter.admit(now: 112) == (true, 0))
    }

    @Test("a line admitted after the window says the count no tick reported yet, and only once")
    func countOnNextLine() {
        var limiter = RateLimiter(interval: 10, burst: 2)
        func admit(_ now: Double) -> [Int] {
            let result = limiter.admit(now: now)
            return [result.log ? 1 : 0, result.suppressed]
        }
        #expect(admit(0) == [1, 0])
        #expect(admit(1) == [1, 0])
        #expect(admit(2) == [0, 0])
        #expect(admit(3) == [0, 0])
        #expect(admit(10.5) == [1, 2])
        #expect(limiter.heldBack(now: 30) == nil)
        #expect(admit(30) == [1, 0])
    }

    @Test("the window is the interval from its first line, not a sliding one")
    func windowFromFirstLine() {
        var limiter = RateLimiter(interval: 10, burst: 1)
        #expect(limiter.admit(now: 0).log)
        #expect(!limiter.admit(now: 9.99).log)
        #expect(limiter.heldBack(now: 9.99) == nil)
        #expect(limiter.heldBack(now: 10) == 1)
        // A new window opens at the next line, not at 10.
        #expect(limiter.admit(now: 15).log)
        #expect(!limiter.admit(now: 24.9).log)
        #expect(limiter.heldBack(now: 24.9) == nil)
        #expect(limiter.heldBack(now: 25) == 1)
    }

    @Test("with no burst every line is held back and counted; none is lost across windows")
    func noBurst() {
        var limiter = RateLimiter(interval: 10, burst: 0)
        #expect(limiter.admit(now: 0) == (false, 0))
        #expect(limiter.admit(now: 1) == (false, 0))
        // A line after the window is held back too; the count carries it and the earlier two.
        #expect(limiter.admit(now: 12) == (false, 0))
        #expect(limiter.heldBack(now: 21) == nil)
        #expect(limiter.heldBack(now: 22) == 3)
    }

    @Test("the held-back line names the count and the limit, once per window")
    func heldBackLine() {
        let captured = Recording.Lines()
        let logger = Logger(label: "ampel.test") { _ in Recording(lines: captured) }
        var limiter = RateLimiter(interval: 10, burst: 5)
        for index in 0..<8 { _ = limiter.admit(now: Double(index) / 10) }
        limiter.logHeldBack(now: 5, to: logger, "held back")
        #expect(captured.value.withLock { $0 }.isEmpty, "nothing while the window lasts")
        limiter.logHeldBack(now: 10, to: logger, "held back")
        limiter.logHeldBack(now: 20, to: logger, "held back")
        #expect(captured.value.withLock { $0 } == ["warning held back held=3 limit=5 lines per 10 s"])
    }
}

/// Keeps each line as `<level> <message> <metadata sorted by key>`.
private struct Recording: LogHandler {
    final class Lines: Sendable {
        let value = Mutex<[String]>([])
    }

    let lines: Lines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let fields = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        lines.value.withLock { $0.append((["\(event.level)", "\(event.message)"] + fields).joined(separator: " ")) }
    }
}
