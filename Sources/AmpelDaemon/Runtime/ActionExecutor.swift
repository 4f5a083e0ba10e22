import AmpelMessages
import AmpelDomain
import AmpelMQTT
import Foundation
import Logging

/// What the executor writes to the journal (``Journal``; a recording one in the tests).
protocol DecisionJournal: AnyObject, Sendable {
    /// A change nobody is told about.
    func append(_ change: SignalEngine.Change)
    /// A change with the messages that announce it, in one write: each message as `finish`
    /// makes it of itself and its id (an alert carries its id), journaled and returned in order.
    func append(_ change: SignalEngine.Change, announcedBy messages: [OutgoingMessage], witness: Witness?,
                finish: (OutgoingMessage, UInt64) -> OutgoingMessage) -> [(id: UInt64, message: OutgoingMessage)]
    /// The broker took announcement `id`.
    func acknowledge(_ id: UInt64)
    /// The broker refused announcement `id`: the next start sends it again.
    func refuse(_ id: UInt64)
}

extension Journal: DecisionJournal {}

/// Where the executor queues an alert's webhook bodies (``Webhooks``; a recording one in the tests).
protocol WebhookQueue: AnyObject, Sendable {
    /// Queues `payload` for webhook `index`, keyed by the alert's `id` (``AlertIDs``).
    func send(webhook index: Int, alertID: String, payload: [UInt8], now: Double)
}

extension Webhooks: WebhookQueue {}

/// Carries out the engine's actions against the journal, the broker and the webhooks, in the
/// order that makes an alert exactly-once across a crash (``Decision``):
///
/// 1. the decision and its announcements in one journal write;
/// 2. the announcements handed to the broker, each acknowledged in the journal when the broker
///    took it;
/// 3. the webhooks queued, keyed by the alert's `id` (``AlertIDs``);
/// 4. the retained publishes, the witness last.
///
/// A crash before 1 leaves the input unhandled in the journal: the next start decides again. A
/// crash between 1 and 4 leaves the announcement pending: the next start reads the witness
/// back and sends it again only if the broker does not retain the witness.
///
/// Publishes are handed over without waiting (``DaemonTransport/enqueue(_:acknowledged:)``), so one input's
/// actions are never interleaved with another's. What is neither a publish nor a decision goes
/// to the daemon's handler, in its place in the list.
final class ActionExecutor {
    let journal: any DecisionJournal
    let transport: any DaemonTransport
    let webhooks: any WebhookQueue
    /// This run's alert ids: each alert's payload and webhook bodies carry its own.
    let alertIDs: AlertIDs
    /// The QoS of announcements (alerts, OwnTracks transitions), `mqtt.alert_qos`: 2 lets the
    /// broker drop a repeat sent after a lost acknowledgement, 1 for brokers without QoS 2.
    let announcementQoS: MQTTQoS
    let logger: Logger
    let now: @Sendable () -> Date
    /// Publishes handed over after a delay (a new device's alert copy for Home Assistant).
    let delayed: DelayedPublishes
    /// Runs after an announced decision is journaled and before its first announcement is
    /// handed over: the one moment a crash test cannot hit from outside (``FaultInjection``).
    var afterJournaling: (() -> Void)?
    private(set) var tally = Tally()
    private var publishLog = RateLimiter(interval: 10, burst: 5)
    private var undelayedLog = RateLimiter(interval: 10, burst: 1)

    /// What was carried out, for `bridge/info` and `/metrics`.
    struct Tally {
        var published = 0
        /// Publishes that repeated what was published before (a recovery); also in ``published``.
        var republished = 0
        var alerts = 0
        var owntracksTransitions = 0
        var publishFailures = 0
        var forgotten = 0
        /// Device records changed or removed: whether the device table changed since a reader last had it.
        var deviceChanges = 0
        var byKind: [SignalEngine.PublishKind: Int] = [:]
    }

    init(journal: any DecisionJournal, transport: any DaemonTransport, webhooks: any WebhookQueue, alertIDs: AlertIDs = AlertIDs(),
         announcementQoS: MQTTQoS = .exactlyOnce, logger: Logger, now: @escaping @Sendable () -> Date) {
        self.journal = journal
        self.transport = transport
        self.webhooks = webhooks
        self.alertIDs = alertIDs
        self.announcementQoS = announcementQoS
        delayed = DelayedPublishes(transport: transport)
        self.logger = logger
        self.now = now
    }

    /// Carries out `actions` in order; `republished`: the publishes repeat what was published
    /// before (a recovery). Every other action goes to `other`, in its place.
    func execute(_ actions: [SignalEngine.Action], republished: Bool = false, other: (SignalEngine.Action) -> Void = { _ in }) {
        for action in actions {
            switch action {
            case .decide(let decision):
                carryOut(decision, republished: republished)
            case .publish(let message, let kind):
                publish(message, kind: kind, republished: republished)
            default:
                other(action)
            }
        }
    }

    func carryOut(_ decision: Decision, republished: Bool) {
        switch decision.change {
        case .device: tally.deviceChanges &+= 1
        case .forgotten:
            tally.deviceChanges &+= 1
            tally.forgotten += 1
        case .district: break
        }
        guard let announcement = decision.announcement else { return journal.append(decision.change) }
        let alertIDs = self.alertIDs, qos = announcementQoS
        let kinds = announcement.messages.map(\.kind)
        var index = 0
        let journaled = journal.append(decision.change, announcedBy: announcement.messages.map(\.message),
                                       witness: announcement.journalWitness) { message, id in
            defer { index += 1 }
            var message = message
            message.qos = qos
            if kinds[index].isAlert { message.payload = AlertIDs.stamp(message.payload, id: alertIDs.id(id)) }
            return message
        }
        afterJournaling?()
        for (publish, journaledMessage) in zip(announcement.messages, journaled) {
            announce(journaledMessage.message, id: journaledMessage.id)
            count(publish.kind)
            if publish.kind.isAlert { tally.alerts += 1 } else { tally.owntracksTransitions += 1 }
        }
        if let homeAssistant = announcement.homeAssistant, let alert = journaled.first, kinds.first?.isAlert == true {
            var event = alert.message
            event.topic = homeAssistant.topic
            if homeAssistant.delay == .zero {
                publish(event, kind: .homeAssistantEvent, republished: republished)
            } else if delayed.add(event, after: homeAssistant.delay) {
                // Counted when queued: the queue hands it over unless a stop comes first.
                count(.homeAssistantEvent, republished: republished)
            } else {
                noteUndelayed()
                publish(event, kind: .homeAssistantEvent, republished: republished)
            }
        }
        // The webhook bodies carry the alert's id, and it is their Idempotency-Key.
        if let alert = journaled.first {
            let id = alertIDs.id(alert.id)
            for notification in announcement.notifications {
                webhooks.send(webhook: notification.webhook, alertID: id, payload: AlertIDs.stamp(notification.payload, id: id),
                              now: now().timeIntervalSince1970)
            }
        }
        for publish in announcement.retained {
            self.publish(publish.message, kind: publish.kind, republished: republished)
        }
        // The witness at the announcements' QoS: the broker forwards a QoS 2 message when it
        // gets the PUBREL, a QoS 1 message at once, so a QoS 1 witness could be retained
        // before its QoS 2 alert is released, and a restart would take the alert as delivered.
        var witness = announcement.witness.message
        witness.qos = max(witness.qos, announcementQoS)
        self.publish(witness, kind: announcement.witness.kind, republished: republished)
    }

    /// Hands an announcement over; its id leaves the journal's pending list when the broker
    /// took it. One that is not acknowledged (the client closed first) stays pending, and one
    /// the broker refused (a PUBACK reason code of 0x80 or above) stays pending without its
    /// witness: the next start sends both. The refusal itself is counted and said where the
    /// transport reports it (``PublishRefusals``), for every publish alike.
    func announce(_ message: OutgoingMessage, id: UInt64) {
        let journal = self.journal
        do {
            try transport.enqueue(message) { error in
                if error == nil {
                    journal.acknowledge(id)
                } else if error?.code == .rejected {
                    journal.refuse(id)
                }
            }
        } catch {
            failed(message, error)
        }
    }

    /// In order, without a round trip per message: libmosquitto delivers QoS 1.
    func publish(_ message: OutgoingMessage, kind: SignalEngine.PublishKind, republished: Bool = false) {
        do {
            try transport.enqueue(message, acknowledged: nil)
            count(kind, republished: republished)
        } catch {
            failed(message, error)
        }
    }

    private func count(_ kind: SignalEngine.PublishKind, republished: Bool = false) {
        tally.published += 1
        tally.byKind[kind, default: 0] += 1
        if republished { tally.republished += 1 }
    }

    /// Counts a publish that libmosquitto refused, and logs it within the rate limit.
    func failed(_ message: OutgoingMessage, _ error: any Error) {
        tally.publishFailures += 1
        let admitted = publishLog.admit(now: now().timeIntervalSince1970)
        if admitted.log {
            logger.warning("publish failed", metadata: ["topic": "\(message.topic)", "error": "\(error)", "suppressed": "\(admitted.suppressed)"])
        }
    }

    /// A burst of new devices filled ``DelayedPublishes``: the copy went without its delay.
    private func noteUndelayed() {
        let admitted = undelayedLog.admit(now: now().timeIntervalSince1970)
        if admitted.log {
            logger.notice("many new devices at once: their alert copies for Home Assistant go without waiting for its entities, which may miss them",
                          metadata: ["waiting": "\(DelayedPublishes.limit)"])
        }
    }

    /// Logs how many warnings the rate limits held back.
    func logHeldBack(now: Double) {
        publishLog.logHeldBack(now: now, to: logger, "held back further warnings of failed publishes (counters.publishFailures in bridge/info counts them all)")
        undelayedLog.logHeldBack(now: now, to: logger, "more alert copies for Home Assistant went without waiting for its entities")
    }
}
