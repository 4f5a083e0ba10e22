import AmpelMessages
import AmpelDomain

/// A publish and what it is for.
struct Publish: Sendable, Hashable {
    var message: OutgoingMessage
    var kind: SignalEngine.PublishKind

    init(_ message: OutgoingMessage, kind: SignalEngine.PublishKind) {
        self.message = message
        self.kind = kind
    }
}

/// A change of what the engine remembers, with what announces it to people: one value, so that
/// the rules that make an alert exactly-once across a crash hold by construction, not by the
/// order of a list.
///
/// The daemon (``ActionExecutor``) carries it out in this order: the change and the
/// announcements in one journal write, the announcements to the broker, the webhooks, the
/// retained publishes, the witness last. A restart that finds an announcement journaled but
/// not acknowledged reads the witness back from the broker: retained there, the broker took
/// the announcement before it (one connection, in order); else it goes again.
struct Decision: Sendable, Hashable {
    var change: SignalEngine.Change
    /// `nil` for a change nobody is told about (a device moved within its phase, a forgotten
    /// device, a state read back from the broker).
    var announcement: Announcement?

    init(_ change: SignalEngine.Change, announcement: Announcement? = nil) {
        self.change = change
        self.announcement = announcement
    }

    struct Announcement: Sendable, Hashable {
        /// The alert (``SignalEngine/PublishKind/deviceAlert`` or `districtAlert`), then the
        /// device's OwnTracks transition, if it has one.
        var messages: [Publish]
        /// The webhook bodies of the alert, queued once it is handed over.
        var notifications: [Notification]
        /// Retained publishes between the announcements and the witness (a district's state).
        var retained: [Publish]
        /// The retained publish (the device's state, the district's phase) that proves the
        /// broker took the announcements: handed over after them.
        var witness: Publish
        /// Where the alert goes again for Home Assistant's event entity, and when.
        var homeAssistant: HomeAssistantEvent?

        init(messages: [Publish], notifications: [Notification] = [], retained: [Publish] = [], witness: Publish,
                    homeAssistant: HomeAssistantEvent? = nil) {
            self.messages = messages
            self.notifications = notifications
            self.retained = retained
            self.witness = witness
            self.homeAssistant = homeAssistant
        }

        /// What the journal keeps to check the witness with.
        var journalWitness: Witness { Witness(topic: witness.message.topic, payload: witness.message.payload) }
    }

    /// A device alert for Home Assistant's event entity, on a topic of its own
    /// (``Topics/deviceEvent(_:)``): Home Assistant subscribes to a new device's entities some
    /// 150 ms after their discovery configs, so the first sighting's alert, sent with them,
    /// would find no subscription. A new device's goes `delay` later; the alert itself goes at
    /// once for every other subscriber. Not journaled: a crash in the delay loses this copy only.
    struct HomeAssistantEvent: Sendable, Hashable {
        var topic: String
        var delay: Duration

        init(topic: String, delay: Duration) {
            self.topic = topic
            self.delay = delay
        }
    }

    /// A webhook body: POST `payload` to webhook number `webhook` (``SignalEngine/Settings/webhooks``).
    struct Notification: Sendable, Hashable {
        var webhook: Int
        var payload: [UInt8]

        init(webhook: Int, payload: [UInt8]) {
            self.webhook = webhook
            self.payload = payload
        }
    }
}
