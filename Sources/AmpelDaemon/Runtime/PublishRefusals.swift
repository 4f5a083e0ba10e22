import AmpelMQTT
import Synchronization

/// What the broker refused: every publish it answered with a reason code of 0x80 or above
/// (MQTT 5: `0x87` not authorised by its ACL, `0x97` quota exceeded, ...), and every input
/// filter it did not grant. A refusal is never a delivery: it is counted by reason and topic
/// class (`bridge/info`'s `counters.refused`, `/metrics`), said in the log once a minute per
/// topic class with the topic and a hint, and makes `/readyz` `degraded` while it continues.
///
/// Fed from the transport's network thread (``record(topic:reason:at:)``), read by the loop's
/// tick (the log, `bridge/info`) and by HTTP readers (`/readyz`, `/metrics`): one lock, held
/// for a dictionary update.
final class PublishRefusals: Sendable {
    /// How long after the last refusal `/readyz` still says `degraded`.
    static let degradedFor: Double = 60
    /// How often the log speaks of one topic class.
    static let logEvery: Double = 60

    struct Latest {
        var topic: String
        var reason: Int
        var at: Double
        /// Refusals of the class since the log last spoke of it.
        var unlogged: Int
        var loggedAt: Double?
    }

    struct State {
        /// Reason name -> topic class -> count.
        var counts: [String: [String: Int]] = [:]
        var latest: [String: Latest] = [:]
        /// Input filters the broker did not grant, with the reason; and whether it granted any.
        var refusedFilters: [(filter: String, reason: String)] = []
        var noFilterGranted = false
    }

    private let state = Mutex(State())

    init() {}

    /// A publish to `topic` of class `topicClass` refused with `reason`.
    func record(topic: String, class topicClass: String, reason: Int, at now: Double) {
        let name = Self.reasonName(reason)
        state.withLock { state in
            state.counts[name, default: [:]][topicClass, default: 0] += 1
            var latest = state.latest[topicClass] ?? Latest(topic: topic, reason: reason, at: now, unlogged: 0, loggedAt: nil)
            latest.topic = topic
            latest.reason = reason
            latest.at = now
            latest.unlogged += 1
            state.latest[topicClass] = latest
        }
    }

    /// The input filters the broker did not grant at the subscribe, and whether it granted none.
    func subscribed(refused: [(filter: String, reason: String)], noneGranted: Bool) {
        state.withLock {
            $0.refusedFilters = refused
            $0.noFilterGranted = noneGranted
        }
    }

    /// Counts by reason name and topic class.
    var counts: [String: [String: Int]] { state.withLock { $0.counts } }

    /// The lines the log owes now: per topic class refused since it last spoke of it, at most
    /// once per ``logEvery``.
    func dueLogs(now: Double) -> [(topicClass: String, topic: String, reason: Int, count: Int)] {
        state.withLock { state in
            var due: [(String, String, Int, Int)] = []
            for (topicClass, var latest) in state.latest.sorted(by: { $0.key < $1.key }) where latest.unlogged > 0 {
                if let logged = latest.loggedAt, now - logged < Self.logEvery { continue }
                due.append((topicClass, latest.topic, latest.reason, latest.unlogged))
                latest.unlogged = 0
                latest.loggedAt = now
                state.latest[topicClass] = latest
            }
            return due
        }
    }

    /// Why the daemon is not ready: the broker granted none of its input filters.
    func problem() -> String? {
        state.withLock { state in
            guard state.noFilterGranted else { return nil }
            return "the broker granted no input filter: " + Self.describe(state.refusedFilters)
        }
    }

    /// Why the daemon works but not wholly (`/readyz` `degraded`): publishes refused within the
    /// last ``degradedFor`` seconds, input filters refused; `nil` when neither.
    func degraded(now: Double) -> String? {
        state.withLock { state in
            var parts: [String] = []
            let recent = state.latest.filter { now - $0.value.at < Self.degradedFor }.sorted { $0.key < $1.key }
            if !recent.isEmpty {
                parts.append("the broker refuses publishes: " + recent.map {
                    "\($0.value.topic) (\($0.key), \(MQTTError.describeReason($0.value.reason)))"
                }.joined(separator: ", "))
            }
            if !state.refusedFilters.isEmpty, !state.noFilterGranted {
                parts.append("the broker refused input filters: " + Self.describe(state.refusedFilters))
            }
            return parts.isEmpty ? nil : parts.joined(separator: "; ")
        }
    }

    static func describe(_ filters: [(filter: String, reason: String)]) -> String {
        filters.map { "\($0.filter) (\($0.reason))" }.joined(separator: ", ")
    }

    /// The name a reason code is counted by: `notAuthorized` for `0x87`; `reason0xNN` for one
    /// without a name here.
    static func reasonName(_ reason: Int) -> String {
        switch reason {
        case 0x80: "unspecifiedError"
        case 0x83: "implementationSpecificError"
        case 0x87: "notAuthorized"
        case 0x90: "topicNameInvalid"
        case 0x91: "packetIdentifierInUse"
        case 0x97: "quotaExceeded"
        case 0x99: "payloadFormatInvalid"
        default: "reason0x" + String(reason, radix: 16, uppercase: true)
        }
    }
}

extension Topics {
    /// What a topic is to the daemon, for the refusal counts: `alert`, `event` (an alert's copy
    /// for Home Assistant), `state`, `phase`, `texts`, `stateReport`, `bridge`, `discovery`,
    /// `owntracks`, or `other` (lamps, probes).
    func refusalClass(of topic: String, discoveryPrefix: String?) -> String {
        let base = self.base + "/"
        if isDeviceOrDistrictTopic(topic) {
            if topic.hasSuffix("/alert") { return "alert" }
            if topic.hasSuffix("/event") { return "event" }
            if topic.hasSuffix("/state") { return "state" }
            if topic.hasSuffix("/phase") { return "phase" }
        }
        if topic.hasPrefix(base + "rules/") { return "texts" }
        if topic.hasPrefix(base + "states/") { return "stateReport" }
        if topic.hasPrefix(bridge + "/") { return "bridge" }
        if let discoveryPrefix, topic.hasPrefix(discoveryPrefix + "/") { return "discovery" }
        if topic.hasPrefix("owntracks/") { return "owntracks" }
        return "other"
    }
}
