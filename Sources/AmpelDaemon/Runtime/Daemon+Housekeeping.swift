import AmpelCore
import AmpelData
import AmpelDomain
import AmpelMQTT
import Foundation
import Logging
import Synchronization
import ServiceLifecycle

/// The tick's work: logs held back, the snapshot and the journal's tidying, forgetting,
/// giving free heap pages back, `bridge/info` and the status hand-over.
extension AmpelDaemon {
    func tick(_ run: inout Running) {
        let now = ContinuousClock.now
        let wallClock = self.now().timeIntervalSince1970
        report.logDropsHeldBack(at: wallClock, to: logger)
        run.executor.logHeldBack(now: wallClock)
        for refusal in status.refusals.dueLogs(now: wallClock) {
            logger.warning("the broker refused publishes: they are not delivered (counters.refused in bridge/info counts them, alerts stay pending for the next start)", metadata: [
                "class": "\(refusal.topicClass)", "topic": "\(refusal.topic)", "refused": "\(refusal.count)",
                "reason": "\(MQTTError.describeReason(refusal.reason)) (0x\(String(refusal.reason, radix: 16)))",
                "hint": "\(Self.refusalHint(refusal.reason))",
            ])
            report.infoDirty = true
        }
        let shed = gate.shed
        if let newly = report.shed(total: shed) {
            logger.warning("the intake was full: shed QoS 0 location messages (counters.dropped.intake-full in bridge/info)",
                           metadata: ["shed": "\(newly)", "total": "\(shed)"])
        }
        // A snapshot once the journal has outgrown the last one: each change costs a
        // constant amount of writing, whatever the number of devices. After the journal
        // failed (a full disk), one as soon as it writes again: it covers what the journal missed.
        if run.journal.retry() || run.journal.wantsSnapshot(snapshotBytes: run.engine.devices.count * Self.snapshotBytesPerDevice) {
            takeSnapshot(run)
        }
        report.journal(failure: run.journal.failure)
        let chores = housekeeping.chores()
        if chores.tidy { run.journal.removeCovered() }
        // The clock is the daemon's; the decision, and which devices, the engine's.
        if chores.forget {
            let forgotten = run.engine.event(.forget(now: Int(self.now().timeIntervalSince1970)))
            if !forgotten.isEmpty {
                logger.info("forgot devices not heard from within devices.forget_after", metadata: [
                    "devices": "\(forgotten.reduce(0) { if case .decide = $1 { $0 + 1 } else { $0 } })",
                ])
                // The bridge/info the actions ask for goes out at the end of this tick, once.
                perform(forgotten, in: run)
            }
        }
        if housekeeping.trimDue(now: now, messages: report.messagesReceived, devices: run.engine.devices.count,
                                statesWritten: saver.statesWritten, reevaluating: run.engine.isReevaluating) {
            saver.trimHeap()
        }
        if !webhooks.senders.isEmpty, webhooks.stats != report.webhookStats { report.infoDirty = true }
        // Built once a tick: the status shows the `bridge/info` just published, from the same counters.
        let counters = report.infoDirty ? liveCounters(run) : nil
        let info = counters.flatMap { publishInfo(run, counters: $0) }
        publishStatus(run, info: info, counters: counters)
    }

    /// A rough size of a device in the snapshot, to compare the journal with.
    static let snapshotBytesPerDevice = 160

    /// Starts a snapshot on the writer thread: the loop only copies the state (copy-on-write),
    /// so a large one never holds up the next location. The journal opens a new segment first;
    /// the old ones go once the snapshot is on disk and their messages are handled.
    func takeSnapshot(_ run: Running) {
        let journal = run.journal
        let mark = journal.beginSnapshot()
        saver.save(PersistedState(devices: run.engine.devices, districts: run.engine.districtPhases, journal: mark)) {
            journal.snapshotWritten(mark)
        }
    }

    /// What to look at for a refusal's reason.
    static func refusalHint(_ reason: Int) -> String {
        switch reason {
        case 0x87: "the broker's ACL: the daemon's user needs write access to its topics (docs/deploy.md, \"ACL\")"
        case 0x97: "the broker's quota for the daemon's user or client"
        case 0x90: "the topic name (outputs, base topic)"
        case 0x99: "the broker's payload format rules"
        default: "the broker's log"
        }
    }
}
