#if AMPEL_FAULT_INJECTION
import Foundation

/// Faults the crash tests inject into the daemon they run. Compiled only where
/// `AMPEL_FAULT_INJECTION` is defined: Package.swift defines it for debug builds, the ones the
/// tests run; the release binary that is deployed has none of this.
enum FaultInjection {
    /// `AMPEL_TEST_CRASH_AFTER_ALERTS`, read once.
    static let crashDue = ProcessInfo.processInfo.environment["AMPEL_TEST_CRASH_AFTER_ALERTS"].flatMap(Int.init)
    static var crashesAfterAlerts: Bool { crashDue != nil }

    /// `AMPEL_TEST_CRASH_AFTER_ALERTS=N`: the process kills itself with SIGKILL right after the
    /// N-th announced decision is journaled and before its alert is handed to the broker (an
    /// alert and its OwnTracks transition are one journal write and count once): the one moment
    /// a test cannot hit from outside. What was handed over before is acknowledged first (a
    /// busy wait on the loop's thread, 5 s at most), so the kill hits this alert alone and not
    /// the gap between an earlier alert and its witness. `nil` without the variable.
    ///
    /// The wait needs the answers read meanwhile, so with the variable the loop stays off the
    /// MQTT network thread (``crashesAfterAlerts``).
    static func crashAfterAlerts(transport: any DaemonTransport) -> (() -> Void)? {
        guard let due = crashDue else { return nil }
        var journaled = 0
        return {
            journaled += 1
            guard journaled == due else { return }
            let until = ContinuousClock.now + .seconds(5)
            while transport.unanswered > 0, ContinuousClock.now < until { usleep(1000) }
            kill(getpid(), SIGKILL)
        }
    }
}
#endif
