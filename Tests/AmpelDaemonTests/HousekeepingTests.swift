@testable import AmpelDaemon
import Testing

/// When the tick's chores are due (``Housekeeping``), without a daemon: ticks and instants given.
struct HousekeepingTests {
    let start = ContinuousClock.now

    @Test("the journal is tidied every tenth tick; without devices.forget_after nothing is forgotten")
    func tidyEveryTenthTick() {
        var housekeeping = Housekeeping(forgetAfter: nil, tick: .seconds(1), now: start)
        let due = (1...30).map { _ in housekeeping.chores() }
        #expect(due.enumerated().filter(\.element.tidy).map { $0.offset + 1 } == [10, 20, 30])
        #expect(!due.contains { $0.forget })
    }

    @Test("devices are checked against forget_after at most once a minute, and at least 60 times per forget_after", arguments: [
        (Duration.seconds(7 * 86_400), Duration.seconds(1), 60),  // a week: once a minute
        (.seconds(120), .seconds(1), 2),  // two minutes: every second tick
        (.seconds(30), .seconds(1), 1),  // shorter than a minute of ticks: every tick
        (.seconds(86_400), .milliseconds(100), 600),  // 100 ms ticks: still once a minute
    ])
    func forgetCadence(_ forgetAfter: Duration, _ tick: Duration, _ every: Int) {
        var housekeeping = Housekeeping(forgetAfter: forgetAfter, tick: tick, now: start)
        #expect(housekeeping.forgetEvery == every)
        let due = (1...(3 * every)).map { _ in housekeeping.chores().forget }
        #expect(due.enumerated().filter(\.element).map { $0.offset + 1 } == [every, 2 * every, 3 * every])
    }

    @Test("the heap is trimmed once the intake has been quiet for trimQuiet after it grew, not while fixes arrive")
    func trimAfterQuiet() {
        let trim = Trims(start: start)
        // New devices, fixes still arriving: no trim.
        #expect(!trim(1, messages: 10, devices: 10, statesWritten: 0, reevaluating: false))
        #expect(!trim(2, messages: 20, devices: 20, statesWritten: 0, reevaluating: false))
        // Quiet for less than trimQuiet: still none; then one trim, and no second while nothing grows.
        #expect(!trim(3, messages: 20, devices: 20, statesWritten: 0, reevaluating: false))
        #expect(trim(4, messages: 20, devices: 20, statesWritten: 0, reevaluating: false))
        #expect(!trim(9, messages: 20, devices: 20, statesWritten: 0, reevaluating: false))
        // A state write grew nothing in the table but left its buffers: a trim.
        #expect(trim(10, messages: 20, devices: 20, statesWritten: 1, reevaluating: false))
    }

    @Test("a burst of known devices is worth a trim only past trimAfterMessages")
    func trimAfterBurst() {
        let trim = Trims(start: start)
        #expect(!trim(10, messages: 0, devices: 0, statesWritten: 0, reevaluating: false))
        let below = Housekeeping.trimAfterMessages - 1
        #expect(!trim(11, messages: below, devices: 0, statesWritten: 0, reevaluating: false))
        #expect(!trim(20, messages: below, devices: 0, statesWritten: 0, reevaluating: false))
        let burst = Housekeeping.trimAfterMessages
        #expect(!trim(21, messages: burst, devices: 0, statesWritten: 0, reevaluating: false))
        #expect(trim(23, messages: burst, devices: 0, statesWritten: 0, reevaluating: false))
    }

    @Test("new data is owed a trim after the walk it started: a trim during the walk does not clear it")
    func trimOwedAfterTheWalk() {
        let trim = Trims(start: start)
        trim.housekeeping.dataTaken()
        // During the walk a quiet intake with new devices trims, and the data's trim stays owed.
        #expect(trim(5, messages: 0, devices: 5, statesWritten: 0, reevaluating: true))
        #expect(!trim(6, messages: 0, devices: 5, statesWritten: 0, reevaluating: true))
        // The walk is done: the owed trim, once.
        #expect(trim(7, messages: 0, devices: 5, statesWritten: 0, reevaluating: false))
        #expect(!trim(8, messages: 0, devices: 5, statesWritten: 0, reevaluating: false))
    }
}

/// ``Housekeeping/trimDue(now:messages:devices:statesWritten:reevaluating:)`` at whole seconds
/// after `start`, with a 2 s quiet time (a class: `#expect` cannot take a mutating call).
final class Trims {
    let start: ContinuousClock.Instant
    var housekeeping: Housekeeping

    init(start: ContinuousClock.Instant) {
        self.start = start
        housekeeping = Housekeeping(forgetAfter: nil, tick: .seconds(1), now: start)
    }

    func callAsFunction(_ seconds: Int, messages: Int, devices: Int, statesWritten: Int, reevaluating: Bool) -> Bool {
        housekeeping.trimDue(now: start + .seconds(seconds), messages: messages, devices: devices, statesWritten: statesWritten,
                             reevaluating: reevaluating)
    }
}
