import Logging

/// What the daemon counts and tells about itself (`bridge/info`, the HTTP status, the log),
/// kept by the loop between two hand-overs: the counters, the recent errors, what the log and
/// `bridge/info` said last, and which generation of the status the device table went with.
/// Pure bookkeeping: the daemon logs and publishes what it decides (`DaemonReportTests`).
struct DaemonReport {
    var counters = Counters()
    var recentErrors = StatusView.RecentErrors()
    /// Messages received so far (the tick tells ``Housekeeping`` when the count last moved).
    var messagesReceived = 0
    /// Something `bridge/info` shows changed since it was last published.
    var infoDirty = true
    /// The webhook counters last published, so that a delivery refreshes `bridge/info`.
    var webhookStats: [String: WebhookCounters] = [:]
    private var dropLog = RateLimiter(interval: 10, burst: 5)
    /// QoS 0 messages shed at the full intake, as far as the log has said (once per tick).
    private var shedLogged = 0
    /// The journal's failure as `bridge/info` last said it.
    private var journalFailureShown: String?
    private var statusGeneration = 0
    /// The status generation the device table was last handed over with, and the executor's
    /// count of device changes then (-1: never).
    private var devicesHanded = (generation: 0, changes: -1)

    /// A location message dropped at `time`: counted, kept among the recent errors; whether to
    /// log it now (``RateLimiter``), with the lines held back before it.
    mutating func dropped(_ reason: DropReason, detail: String, topic: String, at time: Double) -> (log: Bool, suppressed: Int) {
        counters.dropped[reason.rawValue, default: 0] += 1
        infoDirty = true
        recentErrors.append(StatusView.ErrorEntry(at: Int(time), kind: "dropped", reason: reason.rawValue, topic: topic, detail: detail))
        return dropLog.admit(now: time)
    }

    /// Says how many drop warnings the rate limit held back in a window that ended by `time`.
    mutating func logDropsHeldBack(at time: Double, to logger: Logger) {
        dropLog.logHeldBack(now: time, to: logger, "held back further warnings of dropped location messages (counters.dropped in bridge/info counts them all)")
    }

    /// The intake's shed count now: how many were shed since the log last said so, or `nil`.
    mutating func shed(total: Int) -> Int? {
        guard total != shedLogged else { return nil }
        defer { shedLogged = total }
        infoDirty = true
        return total - shedLogged
    }

    /// The journal's failure now (`nil`: it writes): `bridge/info` says it again when it changed.
    mutating func journal(failure: String?) {
        guard failure != journalFailureShown else { return }
        journalFailureShown = failure
        infoDirty = true
    }

    /// The next status generation, and whether it carries the device table: when a reader
    /// asked for it (`wanted`) and it changed (`changes`, the executor's count), or the first
    /// time. Returns the generation the table a reader has goes with.
    mutating func nextStatus(deviceChanges changes: Int, wanted: Bool) -> (generation: Int, devicesGeneration: Int) {
        statusGeneration += 1
        if devicesHanded.changes == changes {
            devicesHanded.generation = statusGeneration
        } else if wanted || devicesHanded.changes < 0 {
            devicesHanded = (statusGeneration, changes)
        }
        return (statusGeneration, devicesHanded.generation)
    }
}
