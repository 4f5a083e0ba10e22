import AmpelCore
import AmpelDomain
import AmpelMessages

extension SignalEngine {
    // MARK: Recovery after a reconnect

    /// The broker may have lost every retained message (a crash without persistence) or hold
    /// the Last Will's `offline`: say `online` first, then publish again what the daemon keeps
    /// retained, byte for byte what it published last. Device states come in batches.
    mutating func reconnected() -> [Action] {
        // Before the start nothing was published; the start publishes everything.
        guard stage == .running else { return [] }
        var actions: [Action] = [
            .publish(OutgoingMessage(topic: settings.topics.bridgeState, text: BridgeState.online, qos: .atLeastOnce, retain: true), kind: .bridgeState),
            .publishInfo,
        ]
        actions += texts()
        let districts = settings.publishDistricts ? dataset.districts(in: settings.region) : []
        for entry in districts {
            let ags = entry.district.ags
            guard let signal = districtSignals[ags] else { continue }
            actions.append(.publish(districtState(ags, signal), kind: .districtState))
            actions.append(.publish(OutgoingMessage(topic: settings.topics.districtPhase(ags), text: districtPhases[ags] ?? signal.phase,
                                                    qos: .atLeastOnce, retain: true),
                                    kind: .districtPhase))
        }
        actions += stateReports.sorted { $0.key < $1.key }.map { stateReportPublish($0.key, $0.value) }
        actions += districtDiscovery()
        actions += lamps(force: true)
        if let owntracks = settings.owntracks {
            actions += cardUsers.sorted().map { .publish(owntracks.card(user: $0), kind: .ownTracksCard) }
        }
        walksStarted += 1
        recovery = DeviceWalk(generation: walksStarted, keys: devices.keys)
        return actions + nextRecoveryBatch()
    }

    /// Up to ``Settings/recoveryBatch`` devices: discovery config and state as last published
    /// (the record holds the position, time, language and the signal's data day and staleness).
    mutating func nextRecoveryBatch() -> [Action] {
        guard var walk = recovery else { return [] }
        var actions: [Action] = []
        for key in walk.nextBatch(settings.recoveryBatch) {
            // A device the re-evaluation after new data has not reached yet is brought up to
            // that data here, alert first: a republished state in the new phase without its
            // alert would pass for the alert's witness after a crash (``Decision``).
            var reevaluated: [Action] = []
            switch reevaluate(key, into: &reevaluated) {
            case .noSignal:
                // A device whose signal cannot be computed had none published for this data either.
                actions += reevaluated
            case .changed:
                actions += deviceDiscovery(key)
                actions += reevaluated
            case .unchanged(let record, let signal):
                actions += deviceDiscovery(key)
                actions.append(.publish(deviceState(key, record, signal), kind: .deviceState))
            }
        }
        if walk.isDone {
            recovery = nil
        } else {
            recovery = walk
            actions.append(.continueRecovery(generation: walk.generation))
        }
        return actions
    }

    // MARK: Re-evaluation

    /// Re-evaluates every district against the data in force, and starts the walk over the
    /// devices (``nextReevaluationBatch()`` gives its first batch).
    ///
    /// At start every district topic is published (retained values may be missing), and an
    /// alert goes out where the phase differs from the one remembered; afterwards only what
    /// changed is published.
    mutating func evaluateAll(initial: Bool, announce: Bool = false) -> [Action] {
        var actions: [Action] = []
        let language = settings.defaultLanguage
        for entry in dataset.districts(in: settings.region) {
            let ags = entry.district.ags
            let signal: Signal
            do {
                signal = try settings.ruleSet.signal(for: entry, dataDate: dataset.date, language: language, stale: stale, course: dataset.courses[ags])
            } catch {
                actions.append(.problem(error.message))
                continue
            }
            let previousSignal = districtSignals[ags]
            let previousPhase = districtPhases[ags]
            defer {
                districtSignals[ags] = signal
                districtPhases[ags] = signal.phase
            }
            let change = previousPhase == signal.phase ? nil : Change.district(ags: ags, phase: signal.phase)
            guard settings.publishDistricts else {
                if let change { actions.append(.decide(Decision(change))) }
                continue
            }
            let state = initial || previousSignal != signal ? [Publish(districtState(ags, signal), kind: .districtState)] : []
            let phase = Publish(OutgoingMessage(topic: settings.topics.districtPhase(ags), text: signal.phase, qos: .atLeastOnce, retain: true), kind: .districtPhase)
            // A district's first phase ever is no change: 96 alerts on a fresh install would be
            // noise. The retained phase after the alert is its witness.
            if let change, let previousPhase {
                let alert = Publish(OutgoingMessage(topic: settings.topics.districtAlert(ags),
                                                    payload: signal.alertJSON(device: nil, from: previousPhase, push: Self.push(signal, who: nil)),
                                                    qos: .atLeastOnce, retain: false, expiry: settings.alertExpiry),
                                    kind: .districtAlert)
                let notifications = notifications(district: ags, from: previousPhase, signal) { (language) throws(SignalError) in
                    try settings.ruleSet.signal(for: entry, dataDate: dataset.date, language: language, stale: stale, course: dataset.courses[ags])
                }
                actions.append(.decide(Decision(change, announcement: .init(messages: [alert], notifications: notifications, retained: state, witness: phase))))
                continue
            }
            if let change { actions.append(.decide(Decision(change))) }
            actions += state.map(Action.publish)
            if initial || change != nil { actions.append(.publish(phase)) }
        }
        actions += stateReports(initial: initial)
        actions += clearVanishedDistricts()
        // Devices in batches, like a recovery: a new publication that changes 1,000,000 devices
        // must not hand the daemon 1,000,000 publishes at once, nor hold up live fixes behind
        // them. A device whose fix comes before its batch is evaluated against the new data
        // then, and its batch finds nothing left to do.
        startDeviceWalk(announce: announce)
        return actions
    }

    /// The retained topics of districts this run published that the data in force no longer
    /// has, emptied: the stand-in snapshot of 2020 has Berlin's twelve Bezirke and Eisenach,
    /// the RKI's maintained dataset Berlin as one district, and a Germany-wide rule set would
    /// otherwise leave thirteen districts with a phase nobody updates.
    mutating func clearVanishedDistricts() -> [Action] {
        let present = Set(dataset.districts(in: settings.region).map(\.district.ags))
        var actions: [Action] = []
        for ags in districtSignals.keys.sorted() where !present.contains(ags) {
            districtSignals[ags] = nil
            guard settings.publishDistricts else { continue }
            actions.append(.publish(OutgoingMessage(topic: settings.topics.districtState(ags), payload: [], qos: .atLeastOnce, retain: true), kind: .districtState))
            actions.append(.publish(OutgoingMessage(topic: settings.topics.districtPhase(ags), payload: [], qos: .atLeastOnce, retain: true), kind: .districtPhase))
        }
        return actions
    }

    /// Starts a walk over every device (``nextReevaluationBatch()``), replacing one under way;
    /// with `announce`, each device's discovery config goes out too (and keeps going out if
    /// the walk it replaces was announcing: its later devices had not had theirs yet).
    mutating func startDeviceWalk(announce: Bool) {
        walksStarted += 1
        let announce = settings.discovery != nil && (announce || reevaluation?.announce == true)
        reevaluation = DeviceWalk(generation: walksStarted, keys: devices.keys, announce: announce)
    }

    /// Up to ``Settings/recoveryBatch`` devices of the re-evaluation: an alert where the phase
    /// changed, the state where phase, data day or staleness changed.
    mutating func nextReevaluationBatch() -> [Action] {
        guard var walk = reevaluation else { return [] }
        var actions: [Action] = []
        for key in walk.nextBatch(settings.recoveryBatch) {
            if devices[key] != nil {
                let entities = DiscoveryTopics.device(key)
                // A device's old configs go before its new ones; after a switch of form they are
                // marked first and emptied once the new config has taken the entities over.
                for retiring in retiringDevices {
                    actions += (retiring.migrate ? retiring.names.migrations(entities) : retiring.names.removals(entities)).map { .publish($0, kind: .discovery) }
                }
                if walk.announce { actions += deviceDiscovery(key) }
                for retiring in retiringDevices where retiring.migrate {
                    actions += retiring.names.removals(entities).map { .publish($0, kind: .discovery) }
                }
            }
            reevaluate(key, into: &actions, republish: shapePending != nil)
        }
        if !walk.isDone {
            reevaluation = walk
            actions.append(.continueReevaluation(generation: walk.generation))
        } else {
            reevaluation = nil
            // Every walk covers every device: once one ends, each has its state in this run's shape.
            if let shape = shapePending {
                shapePending = nil
                actions.append(.recordShape(shape))
            }
            // Every walk covers every device: once one ends, no retired device entity is left.
            if !retiringDevices.isEmpty {
                retiringDevices = []
                actions.append(.recordDiscovery(currentDiscovery, whenTaken: true))
            }
        }
        return actions
    }

    /// What ``reevaluate(_:into:)`` found.
    enum Reevaluation {
        /// Phase, data day or staleness changed, or a republish was asked for: the state (and
        /// an alert where the phase changed) are in the actions.
        case changed
        /// Nothing to publish: the record and its signal under the data in force, for a caller
        /// that republishes it.
        case unchanged(DeviceRecord, Signal)
        /// No such device, or no signal for it (the problem is in the actions).
        case noSignal
    }

    /// Brings device `key` up to the data in force: an alert where its phase changed, its state
    /// where phase, data day or staleness changed, or always with `republish`.
    @discardableResult
    mutating func reevaluate(_ key: String, into actions: inout [Action], republish: Bool = false) -> Reevaluation {
        guard var record = devices[key] else { return .noSignal }
        let language = self.language(device: key, messageLang: record.lang)
        let signal: Signal
        do {
            signal = try self.signal(at: record.district, language: language)
        } catch {
            actions.append(.problem(error.message))
            return .noSignal
        }
        let previousPhase = record.phase
        let changed = previousPhase != signal.phase || record.dataDate != signal.dataDate || record.stale != signal.stale
        guard changed || republish else { return .unchanged(record, signal) }
        if changed {
            record.phase = signal.phase
            record.dataDate = signal.dataDate
            record.stale = signal.stale
            devices[key] = record
        }
        let state = Publish(deviceState(key, record, signal), kind: .deviceState)
        if previousPhase != signal.phase, record.announced {
            actions += ownTracksCard(key, record)
            // New data moved the device, not a fix: the transition happened when that data
            // took effect, not at the device's last fix (which may be days old).
            let dataStart = OwnTracksNotices.dayStart(signal.dataDate) ?? record.tst
            let announcement = Decision.Announcement(
                messages: [Publish(deviceAlert(key, from: previousPhase, signal), kind: .deviceAlert)]
                    + ownTracksTransition(key, record, signal, tst: max(record.tst, dataStart)),
                notifications: notifications(device: key, place: record.district, from: previousPhase, signal),
                witness: state, homeAssistant: homeAssistantEvent(key, new: false))
            actions.append(.decide(Decision(.device(key: key, record: record), announcement: announcement)))
        } else {
            if changed { actions.append(.decide(Decision(.device(key: key, record: record)))) }
            // Its only positions are old fixes: nobody was told its phase, and a change of the
            // phase where it was is no news either. Its first fresh fix alerts (``apply``).
            if previousPhase != signal.phase { actions.append(.alertSuppressed(.oldFix)) }
            actions.append(.publish(state))
        }
        if stage == .running, previousPhase != signal.phase { actions += lamps(force: false, device: key) }
        return .changed
    }
}

/// A walk over every device in batches (a recovery after a reconnect, a re-evaluation after new
/// data): the daemon handles what arrived meanwhile before it asks for the next batch.
struct DeviceWalk {
    /// Which walk: a batch asked for by a walk that another replaced finds nothing to do.
    let generation: Int
    /// The table's own order: a copy-on-write copy, where sorting 1,000,000 keys took seconds.
    let keys: [String]
    /// Each device's discovery configs go out too.
    var announce = false
    private(set) var next = 0

    init(generation: Int, keys: [String], announce: Bool = false) {
        self.generation = generation
        self.keys = keys
        self.announce = announce
    }

    var isDone: Bool { next >= keys.count }

    /// The next `size` keys (fewer at the end).
    mutating func nextBatch(_ size: Int) -> ArraySlice<String> {
        let end = min(keys.count, next + size)
        defer { next = end }
        return keys[next..<end]
    }
}
