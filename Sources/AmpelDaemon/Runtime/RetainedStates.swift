import AmpelMessages
import AmpelMQTT
import Foundation
import Synchronization

/// Reads back, at a start after a lost state, every device state and district phase the
/// broker retains for the daemon (``RetainedState`` parses them, the engine merges them).
///
/// It subscribes to `<base>/bridge/info` and `<base>/district/+/phase`, then to `<base>/device/#`
/// (keys have one level or more: `alice/phone`), and publishes a probe on the same
/// connection, as ``AlertWitnesses`` does: the broker queues a subscription's retained messages
/// when it handles the SUBSCRIBE, and the probe only after that, so once the probe is back the
/// retained flood is complete. Every message is parsed as it arrives on the MQTT network
/// thread, before the journal sees it, and only the compact records are kept: 100,000 states
/// are about 100 MB of JSON but 7 MB of ``DeviceTable``.
///
/// The subscriptions are QoS 0. mosquitto sends a retained flood at QoS 0 without the per-client
/// in-flight window, and a QoS 0 subscription is not kept for the session: at QoS 1 every
/// message beyond `max_inflight_messages` + `max_queued_messages` is dropped at once, and
/// the default 20 + 1,000 would keep 1,020 states. The byte limit (`max_queued_bytes`) holds
/// for both; a flood beyond it is cut without notice, which the device count of the last run's
/// `bridge/info` reveals (``StateRebuild/complete``).
final class RetainedStates: Sendable {
    /// What was read.
    struct Reading: Sendable {
        var devices = DeviceTable()
        var districts: [String: String] = [:]
        var expectedDevices: Int?
        var skipped = 0
        /// The first few skipped messages, for the log.
        var skippedExamples: [(topic: String, reason: String)] = []
        /// The probe came back (every retained message the broker sent has arrived).
        var answered = false
        /// Why the read could not be made (a refused subscription), if it could not.
        var failure: String?
    }

    private struct Shared {
        var reading = Reading()
        /// Messages taken since the read began: the idle timer watches it move.
        var taken = 0
        var done: CheckedContinuation<Void, Never>?
    }

    let topics: Topics
    let probeTopic: String
    private let watching = Atomic<Bool>(false)
    private let shared = Mutex(Shared())

    init(topics: Topics, clientID: String) {
        self.topics = topics
        // Not the witness check's probe topic: a late answer to one must not end the other.
        probeTopic = topics.probe(clientID: clientID, purpose: "states")
    }

    /// The small topics, subscribed first: a flood of device states that overflows the broker's
    /// queue cuts off whatever comes after it, and the last run's device count is what shows
    /// that it was cut.
    var firstFilters: [String] { [topics.bridgeInfo, topics.districtPhasesFilter] }
    /// The device states and the probe that ends them.
    var floodFilters: [String] { [topics.devicesFilter, probeTopic] }
    /// Everything the read subscribes to.
    var filters: [String] { firstFilters + floodFilters }

    /// Called for every message before anything else; `true` when it was the read's and is used up.
    func take(_ message: MQTTMessage) -> Bool {
        guard watching.load(ordering: .relaxed) else { return false }
        if message.topic == probeTopic {
            finish { $0.answered = true }
            return true
        }
        let topic = message.topic
        guard topics.isDeviceOrDistrictTopic(topic) || topic == topics.bridgeInfo else { return false }
        // The flood comes with the retain flag; anything else is a live message that happened
        // to match (none is expected before the start) and says nothing about the past.
        guard message.retain else {
            shared.withLock { $0.taken += 1 }
            return true
        }
        // Parsed outside the lock: only this thread takes messages, the lock guards the result.
        if let key = topics.deviceKey(stateTopic: topic) {
            let parsed = RetainedState.device(key: key, payload: message.payload)
            shared.withLock { shared in
                shared.taken += 1
                switch parsed {
                case .success(let record): shared.reading.devices[key] = record
                case .failure(let rejection): Self.skip(topic, rejection.reason, &shared.reading)
                }
            }
        } else if let ags = topics.districtCode(phaseTopic: topic) {
            let parsed = RetainedState.districtPhase(payload: message.payload)
            shared.withLock { shared in
                shared.taken += 1
                switch parsed {
                case .success(let phase): shared.reading.districts[ags] = phase
                case .failure(let rejection): Self.skip(topic, rejection.reason, &shared.reading)
                }
            }
        } else if topic == topics.bridgeInfo {
            let devices = RetainedState.bridgeDevices(payload: message.payload)
            shared.withLock { shared in
                shared.taken += 1
                shared.reading.expectedDevices = devices
            }
        } else {
            // `…/alert` topics are never retained by the daemon; another retained topic below
            // `device/` (an empty key, a key the daemon refuses) is not its state either.
            shared.withLock { shared in
                shared.taken += 1
                if !topic.hasSuffix("/alert") { Self.skip(topic, "not a device state topic", &shared.reading) }
            }
        }
        return true
    }

    private static func skip(_ topic: String, _ reason: String, _ reading: inout Reading) {
        reading.skipped += 1
        if reading.skippedExamples.count < 5 { reading.skippedExamples.append((topic, reason)) }
    }

    /// Ends the wait with `change`, if it still runs: the probe's publish is cancelled once the
    /// probe is back (its PUBACK may come later), and that is no failure of the read.
    private func finish(_ change: (inout Reading) -> Void) {
        let done: CheckedContinuation<Void, Never>? = shared.withLock { shared in
            guard let done = shared.done else { return nil }
            change(&shared.reading)
            shared.done = nil
            return done
        }
        done?.resume()
    }

    /// Subscribes, publishes the probe, and returns once it is back, or once nothing has
    /// arrived for `idle` (a broker that dropped the probe, or a lost connection), or after
    /// `limit` in all; then unsubscribes.
    func read(transport: any DaemonTransport, idle: Duration, limit: Duration) async -> Reading {
        shared.withLock { $0 = Shared() }
        watching.store(true, ordering: .sequentiallyConsistent)
        defer { watching.store(false, ordering: .sequentiallyConsistent) }
        let filters = self.filters
        let probe = OutgoingMessage(topic: probeTopic, text: "probe", qos: .atLeastOnce, retain: false)
        let asking = Mutex<Task<Void, Never>?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            shared.withLock { $0.done = continuation }
            asking.withLock { $0 = Task {
                do {
                    try await transport.subscribe(self.firstFilters, qos: .atMostOnce)
                    try await transport.subscribe(self.floodFilters, qos: .atMostOnce)
                    try await transport.publish(probe)
                } catch {
                    self.finish { $0.failure = "\(error)" }
                    return
                }
                let start = ContinuousClock.now
                var seen = 0
                while !Task.isCancelled {
                    do { try await Task.sleep(for: idle) } catch { return }
                    let taken = self.shared.withLock { $0.taken }
                    if taken == seen || ContinuousClock.now - start >= limit { break }
                    seen = taken
                }
                self.finish { _ in }
            } }
        }
        // The probe came back (or the time is up): the timer has nothing left to do.
        asking.withLock { $0?.cancel() }
        try? await transport.unsubscribe(filters)
        return shared.withLock { $0.reading }
    }
}
