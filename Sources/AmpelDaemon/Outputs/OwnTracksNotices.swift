import AmpelMessages
import AmpelDomain

/// A device's alerts as the OwnTracks apps of its user show them (`notify.owntracks`).
///
/// The apps subscribe to `owntracks/+/+/event` and turn an incoming `_type: transition` into a
/// notification (Android: `MessageProcessor` hands it to `BackgroundService.sendEventNotification`,
/// which shows "Entering <desc>" under the name of the sender's `card`). So for a device that
/// reports as `owntracks/<user>/<device>`, Ampel speaks as one more device of that user,
/// `owntracks/<user>/<device level>` (``deviceLevel``, `ampel` by default): a transition on
/// `…/event` for each alert, and a retained card with the name "Ampel" on `…/info`.
///
/// Pure: builds messages; ``SignalEngine`` decides when.
struct OwnTracksNotices: Sendable, Hashable {
    /// The topic level Ampel appears under, in place of a device name (`notify.owntracks_device`).
    let deviceLevel: String

    init(deviceLevel: String = "ampel") {
        self.deviceLevel = deviceLevel
    }

    /// The OwnTracks apps' own first topic level: the apps listen below it.
    static let prefix = "owntracks"
    /// The name the apps show for Ampel's messages.
    static let name = "Ampel"
    /// The initials iOS names a transition's sender by (`<tid> enters <desc>`); without one it
    /// showed `(null) enters …`.
    static let trackerID = "AM"

    /// Whether a fix on `topic`, captured as device key `key` by an OwnTracks input, comes from
    /// an OwnTracks app that listens for transitions: the topic is exactly
    /// `owntracks/<user>/<device>` and the key those two levels. Another filter (`owntracks/#`
    /// with more levels, a topic of another prefix, a filter that leaves the user out of the key)
    /// gives no user the app would be listening under.
    static func isAppTopic(_ topic: String, key: String) -> Bool {
        // By bytes, as topics and keys are compared everywhere (decision 28).
        let topic = topic.utf8, key = key.utf8, head = "owntracks/".utf8
        guard topic.count == head.count + key.count, topic.starts(with: head), topic.dropFirst(head.count).elementsEqual(key) else {
            return false
        }
        return key.lazy.filter { $0 == UInt8(ascii: "/") }.count == 1
    }

    /// The user of device `key` (`alice` of `alice/phone`).
    ///
    /// Split at the byte `/`, not at a Character: `/` followed by a combining mark or a
    /// variation selector (U+FE0F) is one Character, and a Character split took the whole key
    /// for the user (the fuzz run's `ö…ß=/\u{FE0F}-0` went to `owntracks/ö…ß=/\u{FE0F}-0/ampel/event`).
    static func user(of key: String) -> String {
        let bytes = key.utf8
        let end = bytes.firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
        return String(decoding: bytes[..<end], as: UTF8.self)
    }

    /// `owntracks/<user>/<device level>/event`.
    func eventTopic(user: String) -> String { "\(Self.prefix)/\(user)/\(deviceLevel)/event" }
    /// `owntracks/<user>/<device level>/info`.
    func infoTopic(user: String) -> String { "\(Self.prefix)/\(user)/\(deviceLevel)/info" }

    /// The transition that announces `signal` to the user of device `key` (QoS 1, not retained,
    /// with the alerts' expiry).
    ///
    /// `desc` is the district and the alert's title in the device's language, as the webhooks'
    /// `message` says it (the app shows "Entering <desc>": the title alone did not say where);
    /// `event` is always `enter`: the device entered a phase. The OwnTracks schema requires
    /// `acc`, `lat`, `lon`, `tst` and `wtst`: the position of the fix and its accuracy (`accuracy`
    /// below), `tst` the time of the transition (``SignalEngine`` passes
    /// it), `wtst` the time the "region" was made: the start of the data's publication day, the
    /// data that gave the phase.
    /// - Parameter accuracy: the fix's `acc` in whole metres (the schema wants an integer); 0
    ///   when the alert comes from new data, not from a fix.
    func transition(key: String, record: DeviceRecord, signal: Signal, tst: Int, accuracy: Int = 0, expiry: Duration?) -> OutgoingMessage {
        var json = JSONWriter(capacity: 256)
        json.raw(#"{"_type":"transition","acc":"#)
        json.number(accuracy)
        json.raw(#","desc":"#)
        json.string([signal.district?.name, signal.headline].compactMap { $0 }.joined(separator: " – "))
        json.raw(#","event":"enter","lat":"#)
        json.number(record.lat)
        json.raw(#","lon":"#)
        json.number(record.lon)
        json.raw(#","t":"l","tid":"#)
        json.string(Self.trackerID)
        json.raw(#","tst":"#)
        json.number(tst)
        json.raw(#","wtst":"#)
        json.number(Self.dayStart(signal.dataDate) ?? tst)
        json.raw("}")
        return OutgoingMessage(topic: eventTopic(user: Self.user(of: key)), payload: json.bytes, qos: .atLeastOnce, retain: false, expiry: expiry)
    }

    /// The retained card that names the sender in the apps (retained: an app that connects
    /// later learns the name before the next transition).
    func card(user: String) -> OutgoingMessage {
        var json = JSONWriter(capacity: 64)
        json.raw(#"{"_type":"card","name":"#)
        json.string(Self.name)
        json.raw("}")
        return OutgoingMessage(topic: infoTopic(user: user), payload: json.bytes, qos: .atLeastOnce, retain: true)
    }

    /// 00:00 UTC of a `YYYY-MM-DD` day, in seconds since 1970.
    static func dayStart(_ iso: String) -> Int? {
        Day(iso: iso).map { $0.daysSinceEpoch * 86_400 }
    }
}
