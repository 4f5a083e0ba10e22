import AmpelMessages
import AmpelDomain

/// A publish and what it is for.
public struct Publish: Sendable, Hashable {
    public var message: OutgoingMessage
    public var kind: SignalEngine.PublishKind

    public init(_ message: OutgoingMessage, kind: SignalEngine.PublishKind) {
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
public struct Decision: Sendable, Hashable {
    public var change: SignalEngine.Change
    /// `nil` for a change nobody is told about (a device moved within its phase, a forgotten
    /// device, a state read back from the broker).
    public var announcement: Announcement?

    public init(_ change: SignalEngine.Change, announcement: Announcement? = nil) {
        self.change = change
        self.announcement = announcement
    }

    public struct Announcement: Sendable, Hashable {
        /// The alert (``SignalEngine/PublishKind/deviceAlert`` or `districtAlert`), then the
        /// device's OwnTracks transition, if it has one.
        public var messages: [Publish]
        /// The webhook bodies of the alert, queued once it is handed over.
        public var notifications: [Notification]
        /// Retained publishes between the announcements and the witness (a district's state).
        public var retained: [Publish]
        /// The retained publish (the device's state, the district's phase) that proves the
        /// broker took the announcements: handed over after them.
        public var witness: Publish
        /// Where the alert goes again for Home Assistant's event entity, and when.
        public var homeAssistant: HomeAssistantEvent?

        public init(messages: [Publish], notifications: [Notification] = [], retained: [Publish] = [], witness: Publish,
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
    public struct HomeAssistantEvent: Sendable, Hashable {
        public var topic: String
        public var delay: Duration

        public init(topic: String, delay: Duration) {
            self.topic = topic
            self.delay = delay
        }
    }

    /// A webhook body: POST `payload` to webhook number `webhook` (``SignalEngine/Settings/webhooks``).
    public struct Notification: Sendable, Hashable {
        public var webhook: Int
        public var payload: [UInt8]

        public init(webhook: Int, payload: [UInt8]) {
            self.webhook = webhook
            self.payload = payload
        }
    }
}
