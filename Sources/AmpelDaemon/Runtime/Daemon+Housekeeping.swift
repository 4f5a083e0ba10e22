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
        dropLog.logHeldBack(now: wallClock, to: logger, "held back further warnings of dropped location messages (counters.dropped in bridge/info counts them all)")
        run.executor.logHeldBack(now: wallClock)
        for refusal in status.refusals.dueLogs(now: wallClock) {
            logger.warning("the broker refused publishes: they are not delivered (counters.refused in bridge/info counts them, alerts stay pending for the next start)", metadata: [
                "class": "\(refusal.topicClass)", "topic": "\(refusal.topic)", "refused": "\(refusal.count)",
                "reason": "\(MQTTError.describeReason(refusal.reason)) (0x\(String(refusal.reason, radix: 16)))",
                "hint": "\(Self.refusalHint(refusal.reason))",
            ])
            infoDirty = true
        }
        let shed = gate.shed
        if shed != shedLogged {
            logger.warning("the intake was full: shed QoS 0 location messages (counters.dropped.intake-full in bridge/info)",
                           metadata: ["shed": "\(shed - shedLogged)", "total": "\(shed)"])
            shedLogged = shed
            infoDirty = true
        }
        // A snapshot once the journal has outgrown the last one: each change costs a
        // constant amount of writing, whatever the number of devices. After the journal
        // failed (a full disk), one as soon as it writes again: it covers what the journal missed.
        if run.journal.retry() || run.journal.wantsSnapshot(snapshotBytes: run.engine.devices.count * Self.snapshotBytesPerDevice) {
            takeSnapshot(run)
        }
        let journalFailure = run.journal.failure
        if journalFailure != journalFailureShown {
            journalFailureShown = journalFailure
            infoDirty = true
        }
        ticksSinceTidy += 1
        if ticksSinceTidy >= 10 {
            ticksSinceTidy = 0
            run.journal.removeCovered()
        }
        // The clock is the daemon's; the decision, and which devices, the engine's.
        ticksSinceForget += 1
        if let forgetAfter = configuration.forgetAfter, ticksSinceForget >= Self.forgetEvery(forgetAfter, tick: flushInterval) {
            ticksSinceForget = 0
            let forgotten = run.engine.event(.forget(now: Int(self.now().timeIntervalSince1970)))
            if !forgotten.isEmpty {
                logger.info("forgot devices not heard from within devices.forget_after", metadata: [
                    "devices": "\(forgotten.reduce(0) { if case .decide = $1 { $0 + 1 } else { $0 } })",
                ])
                perform(forgotten, in: run, infoNow: true)
            }
        }
        if messagesReceived != intakeSeen.count { intakeSeen = (messagesReceived, now) }
        // New devices grew the tables, a burst grew the queues (intake, libmosquitto's
        // outgoing one): once fixes stop arriving, hand the free pages back. Not after every
        // lone fix: the trim walks the whole heap.
        // A state write (tens of MB of JSON for a large table) leaves its buffers free too.
        let statesWritten = saver.statesWritten
        if run.engine.devices.count != trimmedAt.devices || messagesReceived &- trimmedAt.messages >= Self.trimAfterMessages
            || statesWritten != trimmedAt.statesWritten || (dataSinceTrim && !run.engine.isReevaluating),
           now - intakeSeen.at >= trimQuiet {
            trimmedAt = (run.engine.devices.count, messagesReceived, statesWritten)
            // A trim in the middle of a walk (a quiet intake is enough for one) leaves the
            // walk's own garbage: the trim it is owed comes once the walk is done. Without
            // this the start's trim cleared the flag, and 100,000 devices' first walk left
            // the daemon at 70.8 MB where a trim gives 58-60 MB.
            if !run.engine.isReevaluating { dataSinceTrim = false }
            saver.trimHeap()
        }
        if !webhooks.senders.isEmpty, webhooks.stats != webhookStats { infoDirty = true }
        // Built once a tick: the status shows the `bridge/info` just published, from the same counters.
        let counters = infoDirty ? liveCounters(run) : nil
        let info = counters.flatMap { publishInfo(run, counters: $0) }
        publishStatus(run, info: info, counters: counters)
    }

    /// How many ticks apart the devices are checked against `forgetAfter`: a scan reads every
    /// device's time, so once a minute at most, and at least 60 times per `forgetAfter`.
    static func forgetEvery(_ forgetAfter: Duration, tick: Duration) -> Int {
        let ticksPerMinute = max(1, Int(Duration.seconds(60) / tick))
        return max(1, min(ticksPerMinute, Int(forgetAfter / tick) / 60))
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
