import AmpelMessages

/// Where a snapshot stands in the journal; written into `state.json`.
struct JournalMark: Codable, Sendable, Equatable {
    /// The first segment the snapshot does not cover.
    var segment: Int
    /// Inputs up to this sequence number are handled, and their effects in the snapshot.
    var handled: UInt64
    var lastSeq: UInt64
    var lastAlertID: UInt64
    /// Alerts handed over and not acknowledged when the snapshot was taken.
    var pendingAlerts: [PendingAlert]

    init(segment: Int = 0, handled: UInt64 = 0, lastSeq: UInt64 = 0, lastAlertID: UInt64 = 0, pendingAlerts: [PendingAlert] = []) {
        self.segment = segment
        self.handled = handled
        self.lastSeq = lastSeq
        self.lastAlertID = lastAlertID
        self.pendingAlerts = pendingAlerts
    }
}

/// An alert that the broker had not acknowledged, as the snapshot keeps it.
struct PendingAlert: Codable, Sendable, Equatable {
    var id: UInt64
    var topic: String
    /// The alert's JSON text.
    var payload: String
    var qos: Int
    var retain: Bool
    var expirySeconds: Int?
    var witnessTopic: String?
    /// The witness's payload as text (Ampel's own JSON or a phase name).
    var witnessPayload: String?

    init(id: UInt64, message: OutgoingMessage, witness: Witness?) {
        witnessTopic = witness?.topic
        witnessPayload = witness.map { String(decoding: $0.payload, as: UTF8.self) }
        self.id = id
        topic = message.topic
        payload = message.text
        qos = message.qos.rawValue
        retain = message.retain
        expirySeconds = message.expiry.map { Int($0.components.seconds) }
    }

    var witness: Witness? {
        guard let witnessTopic, let witnessPayload else { return nil }
        return Witness(topic: witnessTopic, payload: Array(witnessPayload.utf8))
    }

    var message: OutgoingMessage {
        OutgoingMessage(topic: topic, text: payload, qos: MQTTQoS(rawValue: qos) ?? .atLeastOnce, retain: retain, expiry: expirySeconds.map { .seconds($0) })
    }
}
