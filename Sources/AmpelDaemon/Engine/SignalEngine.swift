import AmpelCore
import AmpelDomain
import AmpelMessages

/// The signal logic of the daemon as a pure state machine: events in, actions out.
///
/// It does no I/O: the daemon carries out the actions (journal, publish) and the tests just
/// call ``event(_:)``. Every accepted fix republishes the device's state (it carries the
/// position); alerts, district topics and lamps are published only when something changed.
struct SignalEngine: Sendable {
    let settings: Settings
    var dataset: Dataset
    var stale: Bool
    var devices: DeviceTable
    /// The current signal of every district of the region, in the default language.
    var districtSignals: [String: Signal] = [:]
    /// The state reports last published (``stateReports(initial:)``), by state id.
    var stateReports: [String: [UInt8]] = [:]
    /// The last published phase of every district (from the state file until `start`).
    var districtPhases: [String: String]
    var lampLooks: [String: LampDriver.Look] = [:]
    /// What each lamp last said about its availability; absent until it said anything.
    var lampsOnline: [String: Bool] = [:]
    var stage = Stage.beforeStart
    /// The walk that republishes every device's state after a reconnect.
    var recovery: DeviceWalk?
    /// The walk that brings every device to the data in force (new data, the start, Home
    /// Assistant back online).
    var reevaluation: DeviceWalk?
    /// Walks started in this run: each has its own generation, so a batch a replaced walk asked
    /// for finds nothing to do.
    var walksStarted = 0
    /// This run's shape while the start's walk republishes every device state into it; the
    /// walk that completes first records it.
    var shapePending: PublishedShape?
    /// Devices whose latest fixes lie in a phase not confirmed yet (``Settings/minDwell``,
    /// ``Settings/maxFixAge``), by the key's bytes as in ``DeviceTable``. Not persisted: a
    /// restart starts the dwell again with the next fix.
    var pending: [[UInt8]: PendingPhase] = [:]
    /// The prefixes and nodes (and forms) whose device entities the start's device walk
    /// removes; `migrate`: this run announces them in the other form (``DiscoveryScope/leftBehind(by:)``).
    var retiringDevices: [(names: DiscoveryTopics, migrate: Bool)] = []
    /// The OwnTracks users whose card went out in this run: sent again after each reconnect.
    var cardUsers: Set<String> = []
    /// The texts topic of each phase, by language and phase id; empty with texts in the states.
    let textsTopics: [String: [String: String]]
    /// The signal of each place and language under the data in force, with its state JSON,
    /// as fixes ask for them; emptied when the data or its staleness changes. Bounded by the
    /// geometry's districts (and `abroad`) times the languages.
    var signalCache: [SignalKey: ShownSignal] = [:]

    /// What each lamp was last told (absent before its first command) and last said about
    /// its availability (absent before it said anything), for the status view.
    var lampLooksSent: [String: LampDriver.Look] { lampLooks }
    var lampAvailability: [String: Bool] { lampsOnline }

    /// A recovery's device batches are under way.
    var isRecovering: Bool { recovery != nil }
    /// A re-evaluation's device batches are under way.
    var isReevaluating: Bool { reevaluation != nil }

    init(settings: Settings, dataset: Dataset, stale: Bool, restored: PersistedState = PersistedState()) {
        self.settings = settings
        self.dataset = dataset
        self.stale = stale
        // A table handed over from another engine in this process carries the times its states
        // went out; this run has published none.
        self.devices = restored.devices.forNewRun()
        self.districtPhases = restored.districts
        var textsTopics: [String: [String: String]] = [:]
        if !settings.outputs.textsInState {
            let phases = settings.ruleSet.phases.map(\.id.id) + [OutsideMarker.id]
            for language in Language.allCases {
                for phase in phases {
                    textsTopics[language.rawValue, default: [:]][phase] =
                        settings.topics.texts(ruleSet: settings.ruleSet.id, phase: phase, lang: language.rawValue)
                }
            }
        }
        self.textsTopics = textsTopics
    }

    /// Where the engine is in its run.
    enum Stage {
        /// It takes in what it remembers (the state file, the broker's retained states) and
        /// the data in force; it publishes nothing.
        case beforeStart
        /// `.start` published everything once; from now on it publishes what changes.
        case running
    }

    /// What the state directory should hold now.
    var persisted: PersistedState { PersistedState(devices: devices, districts: districtPhases) }

    mutating func event(_ event: Event) -> [Action] {
        switch event {
        case .start:
            stage = .running
            let retired = retireDiscovery()
            var actions = retired.now
            actions += retireShape()
            // Before the states that name them.
            actions += texts()
            actions += evaluateAll(initial: true, announce: true)
            actions += districtDiscovery()
            actions += retired.afterConfigs
            actions += lamps(force: true)
            return actions + nextReevaluationBatch()
        case .fix(let fix, let place, let receivedAt):
            return apply(fix, place: place, receivedAt: receivedAt)
        case .data(let dataset, let stale):
            // Every check of the source reports the data in force (a 304 too): the same
            // publication with the same staleness changes no signal, and walking 100,000
            // devices for it each check cost a core at a 1 s refresh.
            if stage == .running, stale == self.stale, dataset == self.dataset, dataset.courses == self.dataset.courses { return [] }
            self.dataset = dataset
            self.stale = stale
            signalCache.removeAll()
            guard stage == .running else { return [] }
            return evaluateAll(initial: false) + lamps(force: false) + nextReevaluationBatch()
        case .lampAvailability(let name, let online, let retained):
            let before = lampsOnline.updateValue(online, forKey: name)
            // A retained `online` at subscribe: the lamp was online when the start's commands went out.
            guard online, before != true, before != nil || !retained else { return [] }
            return lamps(force: true, named: name)
        case .homeAssistantOnline:
            // Every device's config again, in batches: the walk re-evaluates as well, which
            // changes nothing where nothing changed, and takes over a walk under way.
            guard settings.discovery != nil else { return [] }
            startDeviceWalk(announce: true)
            return districtDiscovery() + nextReevaluationBatch()
        case .reconnected:
            return reconnected()
        case .recoverDevices(let generation):
            guard recovery?.generation == generation else { return [] }
            return nextRecoveryBatch()
        case .reevaluateDevices(let generation):
            guard reevaluation?.generation == generation else { return [] }
            return nextReevaluationBatch()
        case .restore(let found, let districts):
            return restore(found, districts: districts)
        case .forget(let now):
            return forget(now: now)
        }
    }

    // MARK: Forgetting

    /// Forgets every device not heard from for ``Settings/forgetAfter``: its record and any
    /// dwell under way go, the retained topics it had (its state, its discovery configs, and
    /// with its user's last OwnTracks device the card under that user) are cleared by empty
    /// retained messages, and the removal is persisted before them, so a restart neither brings
    /// it back nor leaves a topic behind (the journal replays the removal).
    mutating func forget(now: Int) -> [Action] {
        guard stage == .running, let forgetAfter = settings.forgetAfter else { return [] }
        var actions: [Action] = []
        var ownTracksUsers: Set<String> = []
        for key in devices.keys(heardBefore: now - Int(forgetAfter.components.seconds)) {
            if devices[key]?.owntracks == true { ownTracksUsers.insert(OwnTracksNotices.user(of: key)) }
            devices[key] = nil
            pending[Array(key.utf8)] = nil
            actions.append(.decide(Decision(.forgotten(key: key))))
            // The entities go before their state: Home Assistant, still subscribed, rendered the
            // emptied state with the entity's template ("'value_json' is undefined").
            if let discovery = settings.discovery, discovery.scope.devices {
                actions += discovery.names.removals(DiscoveryTopics.device(key)).map { .publish($0, kind: .discovery) }
            }
            actions.append(.publish(OutgoingMessage(topic: settings.topics.deviceState(key), payload: [], qos: .atLeastOnce, retain: true), kind: .deviceState))
        }
        actions += clearCards(of: ownTracksUsers)
        if !actions.isEmpty { actions.append(.publishInfo) }
        return actions
    }

    /// The cards of those of `users` who have no OwnTracks device left, cleared (a card was
    /// retained for them in this run or an earlier one); a user who reports again gets a new one.
    mutating func clearCards(of users: Set<String>) -> [Action] {
        guard !users.isEmpty, let owntracks = settings.owntracks else { return [] }
        var gone = users
        devices.forEach { key, record in
            if record.owntracks { gone.remove(OwnTracksNotices.user(of: key)) }
        }
        return gone.sorted().map { user in
            cardUsers.remove(user)
            return .publish(OutgoingMessage(topic: owntracks.infoTopic(user: user), payload: [], qos: .atLeastOnce, retain: true), kind: .ownTracksCard)
        }
    }

    // MARK: Restoring from the broker

    /// Takes the devices and district phases the engine does not know; a decision for each.
    ///
    /// Before `start`, so that its re-evaluation compares the data in force with the phases
    /// last announced, as it does for a state read from the file: an alert only for a change.
    mutating func restore(_ found: DeviceTable, districts: [String: String]) -> [Action] {
        guard stage == .beforeStart else { return [] }
        var actions: [Action] = []
        found.forEach { key, record in
            guard devices[key] == nil else { return }
            var record = record
            // The state names the language it was written in; a device that never asked for
            // one keeps following the default (and its configuration) rather than being pinned.
            if record.lang == language(device: key, messageLang: nil).rawValue { record.lang = nil }
            devices[key] = record
            actions.append(.decide(Decision(.device(key: key, record: record))))
        }
        let region = Set(dataset.districts(in: settings.region).map(\.district.ags))
        for (ags, phase) in districts.sorted(by: { $0.key < $1.key }) where districtPhases[ags] == nil && region.contains(ags) {
            districtPhases[ags] = phase
            actions.append(.decide(Decision(.district(ags: ags, phase: phase))))
        }
        return actions
    }
}
