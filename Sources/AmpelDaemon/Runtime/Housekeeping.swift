/// When the tick's chores are due: tidying the journal, forgetting devices, giving free heap
/// pages back. A value without I/O: the daemon tells it what it counted and does the chores it
/// names (``AmpelDaemon/tick(_:)``); `HousekeepingTests` drives it alone.
struct Housekeeping {
    /// Ticks between two tidyings of the journal (removing segments a snapshot covers).
    static let tidyEvery = 10
    /// Messages since the last trim that make a quiet intake worth a trim (a burst's worth).
    static let trimAfterMessages = 10_000
    /// How long the intake must be quiet before free heap pages are given back.
    static let trimQuiet: Duration = .seconds(2)

    /// Ticks between two checks against `devices.forget_after`; `nil` without it.
    let forgetEvery: Int?
    private var ticksSinceTidy = 0
    private var ticksSinceForget = 0
    /// The message count at the last tick it moved, and when.
    private var intakeSeen: (count: Int, at: ContinuousClock.Instant)
    private var trimmedAt = (devices: 0, messages: 0, statesWritten: 0)
    /// A new publication was taken in since the last trim: reading it (a 40 MB file in chunks)
    /// and the device walk it started left free pages worth handing back.
    private var dataSinceTrim = false

    /// - Parameters:
    ///   - forgetAfter: `devices.forget_after`; `tick`: the daemon's tick.
    init(forgetAfter: Duration?, tick: Duration, now: ContinuousClock.Instant = .now) {
        forgetEvery = forgetAfter.map { Self.forgetEvery($0, tick: tick) }
        intakeSeen = (0, now)
    }

    /// How many ticks apart the devices are checked against `forgetAfter`: a scan reads every
    /// device's time, so once a minute at most, and at least 60 times per `forgetAfter`.
    static func forgetEvery(_ forgetAfter: Duration, tick: Duration) -> Int {
        let ticksPerMinute = max(1, Int(Duration.seconds(60) / tick))
        return max(1, min(ticksPerMinute, Int(forgetAfter / tick) / 60))
    }

    /// A new publication was taken in.
    mutating func dataTaken() {
        dataSinceTrim = true
    }

    /// This tick's journal tidying and check for devices to forget.
    mutating func chores() -> (tidy: Bool, forget: Bool) {
        ticksSinceTidy += 1
        let tidy = ticksSinceTidy >= Self.tidyEvery
        if tidy { ticksSinceTidy = 0 }
        ticksSinceForget += 1
        let forget = forgetEvery.map { ticksSinceForget >= $0 } ?? false
        if forget { ticksSinceForget = 0 }
        return (tidy, forget)
    }

    /// Whether free heap pages go back now: new devices grew the tables, a burst grew the queues
    /// (intake, libmosquitto's outgoing one), a state write left its buffers, or new data was
    /// read; and then only once fixes have stopped arriving for ``trimQuiet``, not after every
    /// lone fix: the trim walks the whole heap.
    ///
    /// A trim in the middle of the walk over the devices after new data (`reevaluating`; a quiet intake is enough for
    /// one) leaves the walk's own garbage: the trim new data is owed comes once the walk is
    /// done. Without this the start's trim cleared it, and 100,000 devices' first walk left the
    /// daemon at 70.8 MB where a trim gives 58-60 MB.
    mutating func trimDue(now: ContinuousClock.Instant, messages: Int, devices: Int, statesWritten: Int, reevaluating walking: Bool) -> Bool {
        if messages != intakeSeen.count { intakeSeen = (messages, now) }
        let grown = devices != trimmedAt.devices || messages &- trimmedAt.messages >= Self.trimAfterMessages
            || statesWritten != trimmedAt.statesWritten || (dataSinceTrim && !walking)
        guard grown, now - intakeSeen.at >= Self.trimQuiet else { return false }
        trimmedAt = (devices, messages, statesWritten)
        if !walking { dataSinceTrim = false }
        return true
    }
}
