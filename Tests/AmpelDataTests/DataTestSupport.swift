import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Logging
import Synchronization
import Testing

/// A `Clock` that moves only when a test advances it, so refresh intervals cost no real time.
final class TestClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID = 0
        var sleepers: [Int: (deadline: Instant, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var sleeperWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .zero }

    /// How many tasks sleep on this clock right now.
    var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Next { case wait([CheckedContinuation<Void, Never>]), resume, cancelled }
                let next = state.withLock { state -> Next in
                    if Task.isCancelled { return .cancelled }
                    if deadline <= state.now { return .resume }
                    state.sleepers[id] = (deadline, continuation)
                    let count = state.sleepers.count
                    let ready = state.sleeperWaiters.filter { $0.count <= count }.map(\.continuation)
                    state.sleeperWaiters.removeAll { $0.count <= count }
                    return .wait(ready)
                }
                switch next {
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .resume: continuation.resume()
                case .wait(let ready): for waiter in ready { waiter.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time on and wakes every sleeper whose deadline has come.
    func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers.removeValue(forKey: id) }
            return due.values.map(\.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    /// Returns once at least `count` tasks sleep on this clock.
    func waitForSleepers(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.sleepers.count >= count { return true }
                state.sleeperWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

/// Lets the stalled request of `server` (request number `request`) time out: waits until the
/// server has it and the client's timer runs, then moves the clock past the timeout.
func timeOut(request: Int, of server: HTTPFixtureServer, clock: TestClock, timeout: Duration = .seconds(30)) async {
    await server.waitForRequests(request)
    await clock.waitForSleepers(1)
    clock.advance(by: timeout)
}

/// A wall clock a test sets by hand.
final class ManualDate: Sendable {
    private let value: Mutex<Date>
    init(_ iso: String) { value = Mutex(isoDate(iso)) }
    var date: Date { value.withLock { $0 } }
    func set(_ iso: String) { value.withLock { $0 = isoDate(iso) } }
    var function: @Sendable () -> Date { { self.date } }
}

/// Records the pauses a ``RetryPolicy`` asks for, and returns at once.
final class SleepRecorder: Sendable {
    private let recorded = Mutex<[Duration]>([])
    var delays: [Duration] { recorded.withLock { $0 } }
    var sleep: @Sendable (Duration) async throws -> Void {
        { duration in self.recorded.withLock { $0.append(duration) } }
    }
}

func isoDate(_ text: String) -> Date {
    // Test inputs are literals; a typo is a test bug.
    ISO8601DateFormatter().date(from: text)!
}

func day(_ iso: String) -> Day {
    Day(iso: iso)!
}

/// A logger that drops everything (the tests check outcomes and counters, not log lines).
let quietLogger: Logger = {
    var logger = Logger(label: "ampel.test", factory: { _ in SwiftLogNoOpLogHandler() })
    logger.logLevel = .critical
    return logger
}()

/// A client of `server` whose retries take no real time.
///
/// The timeout runs on `timeoutClock`: the default test clock never moves unless a test
/// advances it, so on a loaded machine a slow good answer cannot time out.
func makeClient(
    _ server: HTTPFixtureServer, pageSize: Int = 1000, timeout: Duration = .seconds(30),
    timeoutClock: TestClock = TestClock(), attempts: Int = 1, sleeps: SleepRecorder = SleepRecorder()
) -> ArcGISClient {
    ArcGISClient(
        configuration: .init(
            url: server.queryURL, pageSize: pageSize, timeout: timeout, timeoutClock: timeoutClock,
            retry: RetryPolicy(maxAttempts: attempts, baseDelay: .seconds(2), maxDelay: .seconds(60), jitter: 0.5, sleep: sleeps.sleep)),
        logger: quietLogger)
}


/// A fresh, empty directory for one test.
func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-data-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}



/// A recorded answer with its features filtered, as `f=json` bytes.
func recordedAnswer(day: String, keeping keep: (String) -> Bool) throws -> Data {
    let data = try Data(contentsOf: RecordedRKI.url(day: day))
    var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    let features = try #require(object["features"] as? [[String: Any]])
    object["features"] = features.filter { feature in
        let rs = (feature["attributes"] as? [String: Any])?["RS"] as? String ?? ""
        return keep(rs)
    }
    return try JSONSerialization.data(withJSONObject: object)
}
