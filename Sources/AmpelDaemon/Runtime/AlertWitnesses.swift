import AmpelMessages
import AmpelMQTT
import Foundation
import Synchronization

/// Finds out at start which of the alerts that the last run handed over without an
/// acknowledgement the broker took after all.
///
/// The broker's PUBACK can be lost with the process that waited for it, while the alert went
/// out to every subscriber: sending all unacknowledged alerts again would repeat those. Each
/// alert is followed on the same connection by the retained message that witnesses it (the
/// device's state, the district's phase); brokers handle one connection's messages in order,
/// so a witness found retained means the alert before it was taken too. Only the alerts
/// without their witness go again.
final class AlertWitnesses: Sendable {
    private struct Watch {
        var topics: Set<String> = []
        var probe = ""
        var seen: [String: [UInt8]] = [:]
        var done: CheckedContinuation<Bool, Never>?
    }

    private let watching = Atomic<Bool>(false)
    private let watch = Mutex(Watch())

    /// Called for every message before anything else; `true` when it was the check's and is used up.
    func take(_ message: MQTTMessage) -> Bool {
        guard watching.load(ordering: .relaxed) else { return false }
        return watch.withLock { watch in
            if message.topic == watch.probe {
                watch.done?.resume(returning: true)
                watch.done = nil
                return true
            }
            guard watch.topics.contains(message.topic) else { return false }
            if message.retain { watch.seen[message.topic] = message.payload }
            return true
        }
    }

    /// The pending alerts that the broker has not taken, by reading their witnesses' retained
    /// values: subscribe to them and to a probe topic, publish the probe, and once it comes
    /// back every retained value the broker had for us has arrived (it sends them in order).
    /// Without an answer in `timeout` every pending alert counts as not taken.
    func notTaken(
        _ pending: [(id: UInt64, message: OutgoingMessage, witness: Witness?)], transport: any DaemonTransport, probeTopic: String,
        timeout: Duration
    ) async -> (notTaken: [(id: UInt64, message: OutgoingMessage)], taken: [UInt64], answered: Bool) {
        let witnessed = pending.compactMap(\.witness)
        guard !witnessed.isEmpty else { return (pending.map { ($0.id, $0.message) }, [], true) }
        let topics = Set(witnessed.map(\.topic))
        watch.withLock { $0 = Watch(topics: topics, probe: probeTopic) }
        watching.store(true, ordering: .sequentiallyConsistent)
        defer { watching.store(false, ordering: .sequentiallyConsistent) }
        let asking = Mutex<Task<Void, Never>?>(nil)
        let answered = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            watch.withLock { $0.done = continuation }
            asking.withLock { $0 = Task {
                do {
                    try await transport.subscribe(topics.sorted() + [probeTopic])
                    try await transport.publish(OutgoingMessage(topic: probeTopic, text: "probe", qos: .atLeastOnce, retain: false))
                } catch {}
                try? await Task.sleep(for: timeout)
                watch.withLock { watch in
                    watch.done?.resume(returning: false)
                    watch.done = nil
                }
            } }
        }
        // The probe came back (or the time is up): the timer has nothing left to do.
        asking.withLock { $0?.cancel() }
        try? await transport.unsubscribe(topics.sorted() + [probeTopic])
        let seen = watch.withLock { $0.seen }
        var notTaken: [(id: UInt64, message: OutgoingMessage)] = []
        var taken: [UInt64] = []
        for alert in pending {
            if answered, let witness = alert.witness, let retained = seen[witness.topic], Self.proves(retained, witness) {
                taken.append(alert.id)
            } else {
                notTaken.append((alert.id, alert.message))
            }
        }
        return (notTaken, taken, answered)
    }

    /// Whether `retained` is the witness or a later message of the same kind: the same
    /// payload, or a device state in the same phase with a time at least the witness's.
    static func proves(_ retained: [UInt8], _ witness: Witness) -> Bool {
        if retained == witness.payload { return true }
        guard let now = try? JSONSerialization.jsonObject(with: Data(retained)) as? [String: Any],
              let then = try? JSONSerialization.jsonObject(with: Data(witness.payload)) as? [String: Any],
              let phase = then["phase"] as? String, now["phase"] as? String == phase,
              let tst = then["tst"] as? Int, let later = now["tst"] as? Int else { return false }
        return later >= tst
    }
}
