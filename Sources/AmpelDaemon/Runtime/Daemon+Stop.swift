import AmpelCore
import AmpelData
import AmpelDomain
import AmpelMQTT
import AmpelMessages
import Foundation
import Logging
import Synchronization

/// The stop: what was taken and not handled waits in the journal; the snapshot within the
/// drain limit, the goodbye (`bridge/info`, `offline`) within its own, then a clean leave, or
/// a dropped connection so that the broker's Last Will says `offline`.
extension AmpelDaemon {
    func finish(_ run: Running, producers: Task<Void, Never>) async {
        // Nothing more is taken from the socket (``requestStop()``); what was taken and not
        // handled within the drain limit waits in the journal. Then the snapshot (within the
        // same limit), the goodbye, and a clean leave.
        let loopEnded = ContinuousClock.now
        let unhandled = gate.waiting
        if unhandled > 0 {
            logger.notice("stopping with messages not handled; the journal keeps them for the next start", metadata: ["messages": "\(unhandled)"])
        }
        producers.cancel()
        run.inputs.finish()
        // The webhooks deliver what they hold while the snapshot and the goodbye run.
        let webhooks = self.webhooks
        let webhookDeadline = loopEnded + limits.webhookDrain
        let webhookDrain = Task { await webhooks.stop(before: webhookDeadline) }
        // Every `online` probe goes out before the `offline` below.
        await probes.finishAll()
        let deadline = stopping.handlingEnds ?? .now + limits.drain
        await writeSnapshot(run, before: max(deadline, .now + .milliseconds(500)))
        let snapshotWritten = ContinuousClock.now
        gate.readForGoodbye()
        let clean = await sayGoodbye(run)
        let goodbyeEnded = ContinuousClock.now
        let undelivered = await webhookDrain.value
        if !undelivered.isEmpty {
            logger.warning("webhook alerts not delivered by the stop's limit are lost", metadata: [
                "undelivered": "\(undelivered.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))",
            ])
        }
        gate.stopReading()
        await transport.shutdown(clean: clean)
        // Messages taken while saying goodbye are in the journal (handled at the next start).
        transport.deliver { _ in }
        run.journal.sync()
        await producers.value
        // How long each step of the stop took, for an operator whose stop ran into systemd's limit.
        let requested = deadline - limits.drain
        func took(_ from: ContinuousClock.Instant, _ to: ContinuousClock.Instant) -> String {
            let elapsed = (to - from).components
            return "\(elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000) ms"
        }
        logger.info("stopped", metadata: [
            "devices": "\(run.engine.devices.count)", "accepted": "\(report.counters.acceptedTotal)", "dropped": "\(report.counters.droppedTotal)",
            "handling": "\(took(requested, loopEnded))", "snapshot": "\(took(loopEnded, snapshotWritten))",
            "goodbye": "\(took(snapshotWritten, goodbyeEnded))", "disconnect": "\(took(goodbyeEnded, .now))",
        ])
    }

    /// The stop's snapshot, waited for until `deadline` at most (the journal has it all anyway).
    func writeSnapshot(_ run: Running, before deadline: ContinuousClock.Instant) async {
        let journal = run.journal
        let mark = journal.beginSnapshot()
        let state = PersistedState(devices: run.engine.devices, districts: run.engine.districtPhases, journal: mark)
        let saver = self.saver
        let written = await FirstOutcome.finished(before: deadline, priority: .high) { saver.writeNow(state) }
        if written {
            journal.snapshotWritten(mark)
        } else {
            logger.notice("the snapshot did not finish within the stop's limit; the journal holds the state", metadata: ["devices": "\(run.engine.devices.count)"])
        }
        journal.sync()
    }

    /// Says offline, but does not wait for a broker that is gone or frozen: a QoS 1 publish
    /// waits for the reconnect or the PUBACK, and a stop must not hang on it. Unacknowledged,
    /// the goodbye may never arrive: `false` then, and the connection is dropped without
    /// DISCONNECT so that the broker's Last Will says offline.
    func sayGoodbye(_ run: Running) async -> Bool {
        let transport = self.transport
        let goodbye = [
            OutgoingMessage(topic: topics.bridgeInfo, payload: infoPayload(run), qos: .atLeastOnce, retain: true),
            OutgoingMessage(topic: topics.bridgeState, text: BridgeState.offline, qos: .atLeastOnce, retain: true),
        ]
        let outcome: String? = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                do {
                    for message in goodbye { try await transport.publish(message) }
                    return nil
                } catch {
                    return "\(error)"
                }
            }
            group.addTask {
                try? await Task.sleep(for: self.limits.goodbye)
                return "no acknowledgement within \(self.limits.goodbye)"
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if let outcome {
            logger.warning(
                "could not publish offline state; leaving without DISCONNECT so that the broker publishes the Last Will",
                metadata: ["error": "\(outcome)"])
        } else if status.refusals.counts.isEmpty {
            // The broker acknowledged the goodbye, so everything published before it too.
            run.journal.appendStopped()
        } else {
            // It refused some of it (its ACL, its quota): the next start republishes every
            // retained topic, as after a crash, so that a fixed ACL gets the states too.
            logger.notice("the broker refused publishes this run: the next start republishes every retained topic")
        }
        return outcome == nil
    }
}
