import AmpelCore
import AmpelDomain
import AmpelMessages

extension SignalEngine {
    // MARK: Devices

    mutating func apply(_ fix: LocationFix, place: Signal.DistrictRef?, receivedAt: Int) -> [Action] {
        let key = fix.device
        let known = devices.recordAndStatePublished(key)
        let previous = known?.record
        if let previous, let tst = fix.tst, tst < previous.tst {
            return [.dropped(.outOfOrder)]
        }
        let tst = fix.tst ?? receivedAt
        let messageLang = fix.lang ?? previous?.lang
        let language = self.language(device: key, messageLang: messageLang)
        let here: ShownSignal
        do {
            here = try shownSignal(at: place, language: language)
        } catch {
            return [.problem(error.message)]
        }
        let signal = here.signal
        let inaccurate = settings.maxAccuracy.map { (fix.accuracy ?? 0) > $0 } ?? false
        // A coarse fix may say "still here", never "somewhere else": near a border its circle
        // covers both sides, and following it flipped the phase back and forth.
        if inaccurate, previous == nil || previous?.district?.ags != signal.district?.ags {
            return [.dropped(.inaccurate)]
        }
        var actions: [Action] = []
        let old = settings.maxFixAge.map { receivedAt - tst > Int($0.components.seconds) } ?? false
        // What the device's people were last told: nothing for a device not seen before, nor
        // for one seen so far only in old fixes (not ``DeviceRecord/announced``). Only a phase
        // announced is kept while a move waits; one never announced has nothing to keep.
        let announced = previous.flatMap { $0.announced ? $0 : nil }
        let chosen: ShownSignal
        do {
            chosen = try signalAfterDwell(here, announced: announced, key: key, tst: tst, old: old, inaccurate: inaccurate,
                                          language: language, &actions)
        } catch {
            return actions + [.problem(error.message)]
        }
        // The signal names the district as the data knows it (the geometry's name where the data does not).
        let state = chosen.state
        let shown = chosen.signal
        // A first alert by an old fix would be about where the person was (a phone's queue,
        // delivered late): the device stays unannounced, and its first fresh fix alerts as a
        // first sighting, even in the same phase. Counted where an alert would have gone out
        // without `alerts.max_fix_age`: at the first sighting, and at each old crossing after it.
        let alerting: Bool
        if let announced {
            alerting = announced.phase != shown.phase
        } else {
            alerting = !old
            if old, previous?.phase != shown.phase { actions.append(.alertSuppressed(.oldFix)) }
        }
        let record = DeviceRecord(lat: fix.latitude, lon: fix.longitude, tst: tst, lang: messageLang,
                                  district: shown.district, phase: shown.phase, dataDate: shown.dataDate, stale: shown.stale,
                                  owntracks: fix.owntracks, announced: announced != nil || !old)
        // An alert always has its state right after it, even in a phase the state showed already:
        // the state is the alert's witness across a crash (``Decision``).
        let publishState = alerting
            || stateDue(key: key, previous: previous, record, language: language, lastPublished: known?.statePublished, now: receivedAt)
        devices.set(key, record, statePublished: publishState ? receivedAt : known?.statePublished)
        if previous == nil { actions += deviceDiscovery(key) }
        actions += ownTracksCard(key, record)
        let statePublish = Publish(deviceState(key, record, state), kind: .deviceState)
        if alerting {
            let announcement = Decision.Announcement(
                messages: [Publish(deviceAlert(key, from: announced?.phase, shown), kind: .deviceAlert)]
                    // `acc` may be any finite distance.
                    + ownTracksTransition(key, record, shown, tst: record.tst, accuracy: fix.accuracy.map { Int(min($0, 1e6).rounded()) } ?? 0),
                notifications: notifications(device: key, place: shown.district, from: announced?.phase, shown),
                witness: statePublish, homeAssistant: homeAssistantEvent(key, new: previous == nil))
            actions.append(.decide(Decision(.device(key: key, record: record), announcement: announcement)))
        } else {
            actions.append(.decide(Decision(.device(key: key, record: record))))
            if publishState { actions.append(.publish(statePublish)) }
        }
        if stage == .running {
            actions += lamps(force: false, device: key)
        }
        return actions
    }

    /// The signal the record takes: the fix's own, or the one last announced while a move into
    /// another phase waits to be confirmed (`alerts.min_dwell`). Appends the suppressions it
    /// counts to `actions`.
    mutating func signalAfterDwell(_ here: ShownSignal, announced: DeviceRecord?, key: String, tst: Int, old: Bool, inaccurate: Bool,
                                   language: Language, _ actions: inout [Action]) throws(SignalError) -> ShownSignal {
        let signal = here.signal
        let pendingKey = Array(key.utf8)
        if let previous = announced, previous.phase != signal.phase, previous.district?.ags != signal.district?.ags {
            var entered: PendingPhase
            if let current = pending[pendingKey], current.phase == signal.phase {
                entered = current
            } else {
                // An excursion into a third phase ends the one before, unannounced.
                if pending[pendingKey]?.fresh == true { actions.append(.alertSuppressed(.dwell)) }
                if old { actions.append(.alertSuppressed(.oldFix)) }
                entered = PendingPhase(phase: signal.phase, since: tst, fixes: 0, fresh: !old)
            }
            entered.fixes += 1
            // An old fix can tell how long the device has been there, but only a fresh one
            // confirms: the alert is about where the person is now.
            if !old, settings.minDwell.isMet(since: entered.since, tst: tst, fixes: entered.fixes) {
                pending[pendingKey] = nil
            } else {
                pending[pendingKey] = entered
                return try shownSignal(at: previous.district, language: language)
            }
        } else if !inaccurate, let left = pending.removeValue(forKey: pendingKey), left.fresh, left.phase != signal.phase {
            // Back in the phase last announced (or in another district of it) before the dwell was met.
            actions.append(.alertSuppressed(.dwell))
        }
        return here
    }

    /// Whether a fix republishes the device's state: always with `every_fix`; with `on_change`
    /// when a consumer would see something new (phase, district, staleness, data day,
    /// language; the rule set is one per run and a restart publishes each device's first fix),
    /// or when the retained one is a heartbeat old. A phase change is always one: the state
    /// after an alert is its witness (``Decision``).
    func stateDue(key: String, previous: DeviceRecord?, _ record: DeviceRecord, language: Language, lastPublished: Int?, now: Int) -> Bool {
        guard settings.outputs.deviceState == .onChange, let previous, let lastPublished else { return true }
        let seen = previous.phase == record.phase && previous.district == record.district && previous.dataDate == record.dataDate
            && previous.stale == record.stale && self.language(device: key, messageLang: previous.lang) == language
        guard seen else { return true }
        // A clock set back counts as due: waiting for it to catch up could hold a state for hours.
        return now - lastPublished >= Int(settings.outputs.heartbeat.components.seconds) || now < lastPublished
    }

    func language(device key: String, messageLang: String?) -> Language {
        if let configured = settings.devices[key]?.lang { return configured }
        if let messageLang { return Language(requested: messageLang) }
        return settings.defaultLanguage
    }

    /// The signal for a place (a district, `nil` abroad):
    /// ``RuleSet/signal(atDistrict:placeName:dataset:region:language:stale:directory:)``, the one
    /// path from a position to a signal that `ampel check` takes too.
    func signal(at place: Signal.DistrictRef?, language: Language) throws(SignalError) -> Signal {
        try settings.ruleSet.signal(atDistrict: place?.ags, placeName: place?.name, dataset: dataset,
                                    region: settings.region, language: language, stale: stale)
    }

    func deviceState(_ key: String, _ record: DeviceRecord, _ signal: Signal) -> OutgoingMessage {
        deviceState(key, record, Signal.StateJSON(signal, texts: textsTopic(signal)))
    }

    func deviceState(_ key: String, _ record: DeviceRecord, _ state: Signal.StateJSON) -> OutgoingMessage {
        let fields = Signal.DeviceFields(device: key, lat: record.lat, lon: record.lon, tst: record.tst)
        return OutgoingMessage(topic: settings.topics.deviceState(key), payload: state.json(device: fields), qos: .atLeastOnce, retain: true)
    }

    /// What ``signalCache`` holds for a place and language.
    struct SignalKey: Hashable {
        var place: Signal.DistrictRef?
        var language: Language
    }

    /// A signal with the pieces of its state JSON.
    struct ShownSignal {
        var signal: Signal
        var state: Signal.StateJSON
    }

    /// ``signal(at:language:)`` for a fix's place, from ``signalCache`` once asked for.
    mutating func shownSignal(at place: Signal.DistrictRef?, language: Language) throws(SignalError) -> ShownSignal {
        let key = SignalKey(place: place, language: language)
        if let cached = signalCache[key] { return cached }
        let signal = try signal(at: place, language: language)
        let shown = ShownSignal(signal: signal, state: Signal.StateJSON(signal, texts: textsTopic(signal)))
        signalCache[key] = shown
        return shown
    }
}
