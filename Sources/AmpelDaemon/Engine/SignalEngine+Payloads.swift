import AmpelCore
import AmpelDomain
import AmpelMessages

extension SignalEngine {
    func districtState(_ ags: String, _ signal: Signal) -> OutgoingMessage {
        OutgoingMessage(topic: settings.topics.districtState(ags), payload: signal.json(texts: textsTopic(signal)), qos: .atLeastOnce, retain: true)
    }

    /// The texts topic a state names; `nil` with the texts in the state.
    func textsTopic(_ signal: Signal) -> String? {
        textsTopics[signal.lang]?[signal.phase]
    }

    /// Every phase's texts in every language (none with the texts in the states), retained.
    func texts() -> [Action] {
        guard !settings.outputs.textsInState else { return [] }
        let ruleSet = settings.ruleSet
        var actions: [Action] = []
        for language in Language.allCases {
            let outside = ruleSet.outsideSignal(district: nil, dataDate: dataset.date, language: language)
            let signals = ruleSet.phases.map { phase in
                var signal = outside
                signal.phase = phase.id.id
                signal.title = phase.title(language)
                signal.rules = phase.rules(language)
                return signal
            } + [outside]
            for signal in signals {
                guard let topic = textsTopic(signal) else { continue }
                actions.append(.publish(OutgoingMessage(topic: topic, payload: signal.textsJSON(), qos: .atLeastOnce, retain: true), kind: .texts))
            }
        }
        return actions
    }

    /// The alert on the device's topic, with the one-line `message` and `priority` webhooks get.
    func deviceAlert(_ key: String, from: String?, _ signal: Signal) -> OutgoingMessage {
        OutgoingMessage(topic: settings.topics.deviceAlert(key),
                        payload: signal.alertJSON(device: key, from: from, push: Self.push(signal, who: settings.devices[key]?.name ?? key)),
                        qos: .atLeastOnce, retain: false, expiry: settings.alertExpiry)
    }

    /// Where a device's alert goes for Home Assistant: `nil` while its entities are not
    /// announced; a device announced just now (`new`) gets it after ``Settings/newEntityDelay``.
    func homeAssistantEvent(_ key: String, new: Bool) -> Decision.HomeAssistantEvent? {
        guard settings.discovery?.scope.devices == true else { return nil }
        return .init(topic: settings.topics.deviceEvent(key), delay: new ? settings.newEntityDelay : .zero)
    }

    // MARK: Webhooks

    /// A device alert for every webhook that wants it, each in the webhook's language (the
    /// device's own when it names none).
    func notifications(device key: String, place: Signal.DistrictRef?, from: String?, _ signal: Signal) -> [Decision.Notification] {
        guard !settings.webhooks.isEmpty else { return [] }
        let who = settings.devices[key]?.name ?? key
        return notifications(from: from, signal, wanted: { $0.wants(device: key) }, device: key, who: who) { (language) throws(SignalError) in
            try self.signal(at: place, language: language)
        }
    }

    /// A district alert for every webhook that wants it.
    func notifications(district ags: String, from: String, _ signal: Signal,
                       signalIn: (Language) throws(SignalError) -> Signal) -> [Decision.Notification] {
        guard !settings.webhooks.isEmpty else { return [] }
        return notifications(from: from, signal, wanted: { $0.wants(district: ags) }, device: nil, who: nil, signalIn: signalIn)
    }

    private func notifications(from: String?, _ signal: Signal, wanted: (WebhookSettings) -> Bool, device: String?, who: String?,
                               signalIn: (Language) throws(SignalError) -> Signal) -> [Decision.Notification] {
        var notifications: [Decision.Notification] = []
        var payloads: [Language: [UInt8]] = [:]
        for (index, webhook) in settings.webhooks.enumerated() where wanted(webhook) {
            let language = webhook.language ?? Language(rawValue: signal.lang) ?? settings.defaultLanguage
            if payloads[language] == nil {
                // The same place and data as the alert: a signal in another language cannot
                // fail where this one did not; if it did, the alert's own language goes.
                let translated = language.rawValue == signal.lang ? signal : ((try? signalIn(language)) ?? signal)
                payloads[language] = translated.alertJSON(device: device, from: from, push: Self.push(translated, who: who))
            }
            notifications.append(Decision.Notification(webhook: index, payload: payloads[language] ?? []))
        }
        return notifications
    }

    /// The webhook body's `message` (who, where, the phase's title) and `priority` (Gotify's
    /// 0-10 scale: the darker the phase, the higher; `outside` and green like a notice).
    static func push(_ signal: Signal, who: String?) -> Signal.PushFields {
        let parts = [who, signal.district?.name, signal.headline].compactMap { $0 }
        let priority = switch signal.phase {
        case "yellow": 5
        case "red": 7
        case "darkred": 8
        default: 4
        }
        return Signal.PushFields(message: parts.joined(separator: " – "), priority: priority)
    }

    // MARK: OwnTracks apps

    /// The card of the device's OwnTracks user, once per run (retained on the broker; again
    /// after a reconnect): before the user's first transition of the run, so the app names it.
    mutating func ownTracksCard(_ key: String, _ record: DeviceRecord) -> [Action] {
        guard record.owntracks, let owntracks = settings.owntracks else { return [] }
        let user = OwnTracksNotices.user(of: key)
        guard cardUsers.insert(user).inserted else { return [] }
        return [.publish(owntracks.card(user: user), kind: .ownTracksCard)]
    }

    /// The device alert for the device's OwnTracks apps, right after the alert and before the
    /// state that witnesses both (``Decision``).
    func ownTracksTransition(_ key: String, _ record: DeviceRecord, _ signal: Signal, tst: Int, accuracy: Int = 0) -> [Publish] {
        guard record.owntracks, let owntracks = settings.owntracks else { return [] }
        return [Publish(owntracks.transition(key: key, record: record, signal: signal, tst: tst, accuracy: accuracy, expiry: settings.alertExpiry),
                        kind: .deviceTransition)]
    }
}
