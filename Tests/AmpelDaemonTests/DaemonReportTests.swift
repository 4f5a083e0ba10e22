@testable import AmpelDaemon
import Testing

/// What the daemon counts and tells about itself (``DaemonReport``), without a daemon.
struct DaemonReportTests {
    @Test("every drop is counted and kept among the recent errors; the log gets five a window, then the count held back")
    func drops() {
        var report = DaemonReport()
        report.infoDirty = false
        let logged = (0..<8).map { report.dropped(.notJSON, detail: "x", topic: "t/\($0)", at: 100).log }
        #expect(logged == [true, true, true, true, true, false, false, false])
        #expect(report.counters.dropped["not-json"] == 8)
        #expect(report.recentErrors.entries.map(\.topic) == (0..<8).map { "t/\($0)" })
        #expect(report.infoDirty)
        // The next window: the first line says what the last one held back.
        let next = report.dropped(.notJSON, detail: "x", topic: "t/8", at: 111)
        #expect(next.log && next.suppressed == 3)
    }

    @Test("the shed count is said once per change, as what was shed since")
    func shed() {
        var report = DaemonReport()
        #expect(report.shed(total: 0) == nil)
        #expect(report.shed(total: 40) == 40)
        #expect(report.shed(total: 40) == nil)
        #expect(report.shed(total: 45) == 5)
    }

    @Test("bridge/info is due again when the journal's failure changes, not while it stays")
    func journalFailure() {
        var report = DaemonReport()
        report.infoDirty = false
        report.journal(failure: nil)
        #expect(!report.infoDirty)
        report.journal(failure: "no space")
        #expect(report.infoDirty)
        report.infoDirty = false
        report.journal(failure: "no space")
        #expect(!report.infoDirty)
        report.journal(failure: nil)
        #expect(report.infoDirty)
    }

    @Test("the device table goes with a status the first time, when asked for and changed, and keeps its generation otherwise")
    func deviceGenerations() {
        var report = DaemonReport()
        // The first status carries it.
        #expect(report.nextStatus(deviceChanges: 0, wanted: false) == (1, 1))
        // Unchanged: the same table, now with this generation.
        #expect(report.nextStatus(deviceChanges: 0, wanted: false) == (2, 2))
        // Changed, nobody asked: the readers keep the table of generation 2.
        #expect(report.nextStatus(deviceChanges: 3, wanted: false) == (3, 2))
        // Asked for: handed over.
        #expect(report.nextStatus(deviceChanges: 3, wanted: true) == (4, 4))
        #expect(report.nextStatus(deviceChanges: 3, wanted: false) == (5, 5))
    }
}
