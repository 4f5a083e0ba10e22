import AmpelCore
import AmpelDomain

/// What the daemon remembers of one device; persisted across restarts.
public struct DeviceRecord: Codable, Sendable, Hashable {
    public var lat: Double
    public var lon: Double
    /// The time of the fix (its `tst`, else when it arrived), seconds since 1970.
    public var tst: Int
    /// The language the device's messages asked for, if any.
    public var lang: String?
    /// The district the position lies in; `nil` outside Germany.
    public var district: Signal.DistrictRef?
    /// The last phase published for the device (`green` … `darkred`, `outside`).
    public var phase: String
    /// The data day and staleness of the last published state: a change republishes it.
    public var dataDate: String
    public var stale: Bool
    /// The last fix came over the OwnTracks input on `owntracks/<key>`, the key being
    /// `<user>/<device>`: the user's OwnTracks apps get the device's alerts as transitions
    /// (``OwnTracksNotices``). Kept with the record, so an alert that new data brings later
    /// reaches the phone too.
    public var owntracks = false
    /// The device's first alert has gone out. `false` for a device seen so far only in fixes
    /// older than `alerts.max_fix_age` (a phone's queue delivered late): its state shows where
    /// those put it, but nobody was told, so its next fresh fix alerts as a first sighting,
    /// whatever its phase. Persisted with the record: a restart in between must neither lose
    /// that alert nor send it twice.
    public var announced = true
}

extension DeviceRecord {
    // A state file written before `owntracks` existed has no such member: the device is then
    // no OwnTracks phone until its next fix says so. The file writes it only when `true`.
    // Likewise `announced`, written only when `false`: every device of an older file was
    // announced at its first fix.
    private enum CodingKeys: String, CodingKey {
        case lat, lon, tst, lang, district, phase, dataDate, stale, owntracks, announced
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(lat: try c.decode(Double.self, forKey: .lat), lon: try c.decode(Double.self, forKey: .lon),
                  tst: try c.decode(Int.self, forKey: .tst), lang: try c.decodeIfPresent(String.self, forKey: .lang),
                  district: try c.decodeIfPresent(Signal.DistrictRef.self, forKey: .district),
                  phase: try c.decode(String.self, forKey: .phase), dataDate: try c.decode(String.self, forKey: .dataDate),
                  stale: try c.decode(Bool.self, forKey: .stale),
                  owntracks: try c.decodeIfPresent(Bool.self, forKey: .owntracks) ?? false,
                  announced: try c.decodeIfPresent(Bool.self, forKey: .announced) ?? true)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(lat, forKey: .lat)
        try c.encode(lon, forKey: .lon)
        try c.encode(tst, forKey: .tst)
        try c.encodeIfPresent(lang, forKey: .lang)
        try c.encodeIfPresent(district, forKey: .district)
        try c.encode(phase, forKey: .phase)
        try c.encode(dataDate, forKey: .dataDate)
        try c.encode(stale, forKey: .stale)
        if owntracks { try c.encode(true, forKey: .owntracks) }
        if !announced { try c.encode(false, forKey: .announced) }
    }
}

/// The engine's memory, as written to the state directory.
public struct PersistedState: Codable, Sendable, Equatable {
    public static let currentVersion = 1
    public var version = PersistedState.currentVersion
    public var devices = DeviceTable()
    /// The last published phase of each district of the region, by code.
    public var districts: [String: String] = [:]
    /// Where in the journal this state was taken; `nil` in a file written before the journal.
    public var journal: JournalMark?

    public init(devices: DeviceTable = DeviceTable(), districts: [String: String] = [:], journal: JournalMark? = nil) {
        self.devices = devices
        self.districts = districts
        self.journal = journal
    }
}

/// Where a position lies, as the geometry index answers.
public enum Place: Sendable, Hashable {
    /// In a German district (code and name from the geometry).
    case district(ags: String, name: String)
    /// In no German district.
    case abroad

    /// The district's code and the geometry's name for it; `nil` abroad.
    var district: (ags: String, name: String)? {
        if case .district(let ags, let name) = self { (ags, name) } else { nil }
    }
}

/// The signal logic of the daemon as a pure state machine: events in, actions out.
///
/// It does no I/O: the daemon carries out the actions (publish, persist) and the tests just
/// call ``event(_:)``. Every accepted fix republishes the device's state (it carries the
/// position); alerts, district topics and lamps are published only when something changed.
public struct SignalEngine: Sendable {
    public struct Settings: Sendable {
        public var ruleSet: RuleSet
        public var region: Region
        public var topics: Topics
        public var defaultLanguage: Language
        public var devices: [String: DaemonConfiguration.DeviceSettings]
        /// Message expiry of alerts; `nil` for none (MQTT 3.1.1 has no expiry).
        public var alertExpiry: Duration?
        public var lamps: [LampSettings]
        /// `nil` turns discovery off.
        public var discovery: Discovery?
        /// What earlier runs may have announced (``DiscoveryScopeFile``): what of it the
        /// current ``discovery`` does not announce is removed at start.
        public var announcedDiscovery: [DiscoveryScope]
        /// The shape of the states the last run left retained (``PublishedShapeFile``); another
        /// than this run's republishes every device state at start. `nil`: take it as this run's.
        public var publishedShape: PublishedShape?
        /// Alerts to the OwnTracks apps of devices that report as `owntracks/<user>/<device>`;
        /// `nil` for none (`notify.owntracks: false`).
        public var owntracks: OwnTracksNotices?
        /// Devices republished per batch after a reconnect (state and discovery config each),
        /// and devices re-evaluated (and announced) per batch after new data and at start; the
        /// daemon handles what arrived in between before it asks for the next batch. A fix that
        /// arrives meanwhile waits for at most one batch: 500 devices' configs and states take
        /// about 10 ms to build (2,000 held fixes back 40 ms at 1,000,000 devices).
        public var recoveryBatch: Int
        /// A fix older than this when it arrives (its `tst` against the time it arrived) moves
        /// no device into another phase and so alerts no one, not even as a first sighting
        /// (``DeviceRecord/announced``); `nil` for no limit.
        public var maxFixAge: Duration?
        /// A fix whose `acc` is above this many metres moves no device into another district;
        /// `nil` for no limit.
        public var maxAccuracy: Double?
        /// How long a device must stay in a new phase it moved into before its alert goes out.
        public var minDwell: Dwell
        /// The webhooks, in the order of ``Action/notify(webhook:payload:)``'s index.
        public var webhooks: [WebhookSettings]
        /// A device whose last fix is older than this is forgotten (``Event/forget(now:)``);
        /// `nil` never forgets.
        public var forgetAfter: Duration?
        /// When device states go out and whether states carry the texts (`outputs`).
        public var outputs: DaemonConfiguration.OutputSettings
        /// District states, phases and alerts (with their webhooks) and the bridge's and the
        /// districts' discovery configs (`outputs.districts`). Off on every instance of a
        /// partitioned deployment but one: the district topics are the same for all.
        public var publishDistricts = true

        public init(ruleSet: RuleSet, region: Region = .bavaria, topics: Topics = Topics(), defaultLanguage: Language = .en,
                    devices: [String: DaemonConfiguration.DeviceSettings] = [:], alertExpiry: Duration? = .seconds(3600),
                    lamps: [LampSettings] = [], discovery: Discovery? = nil, announcedDiscovery: [DiscoveryScope] = [],
                    publishedShape: PublishedShape? = nil, owntracks: OwnTracksNotices? = nil, recoveryBatch: Int = 500,
                    maxFixAge: Duration? = nil, maxAccuracy: Double? = nil, minDwell: Dwell = .none, webhooks: [WebhookSettings] = [],
                    forgetAfter: Duration? = nil, outputs: DaemonConfiguration.OutputSettings = .init()) {
            self.webhooks = webhooks
            self.forgetAfter = forgetAfter
            self.outputs = outputs
            self.ruleSet = ruleSet
            self.region = region
            self.topics = topics
            self.defaultLanguage = defaultLanguage
            self.devices = devices
            self.alertExpiry = alertExpiry
            self.lamps = lamps
            self.discovery = discovery
            self.announcedDiscovery = announcedDiscovery
            self.publishedShape = publishedShape
            self.owntracks = owntracks
            self.recoveryBatch = max(1, recoveryBatch)
            self.maxFixAge = maxFixAge
            self.maxAccuracy = maxAccuracy
            self.minDwell = minDwell
        }
    }

    public enum Event: Sendable {
        /// Publish everything once: district topics, re-evaluated devices, discovery, lamps.
        case start
        /// A position; `receivedAt` (seconds since 1970) stands in for a missing `tst`.
        case fix(LocationFix, place: Place, receivedAt: Int)
        /// A dataset (a new publication, or the same one with another staleness).
        case data(Dataset, stale: Bool)
        /// A lamp reported whether it is online (`retained`: replayed by the broker at
        /// subscribe). Its colour goes again when it comes back: offline -> online, or a first
        /// live `online` (it connected after the start's commands went nowhere). Not on every
        /// `online`: WLED republishes its status after each change of its own state, and each
        /// answer with the colour made it publish again.
        case lampAvailability(name: String, online: Bool, retained: Bool)
        /// Home Assistant reported online: send discovery again.
        case homeAssistantOnline
        /// The broker connection is back (after the first one): `bridge/state` `online` first,
        /// then every retained topic (bridge info, district state and phase, discovery) and the
        /// lamps' colours, and the first batch of device states; the rest come with
        /// ``recoverDevices(generation:)``, as ``Action/continueRecovery(generation:)`` asks.
        case reconnected
        /// The next batch of the device states (and their discovery configs) of the recovery
        /// `generation`; nothing when a later reconnect started a new one.
        case recoverDevices(generation: Int)
        /// The next batch of devices to re-evaluate against the data of re-evaluation
        /// `generation`; nothing when newer data started a new one.
        case reevaluateDevices(generation: Int)
        /// What the daemon published before its state file was lost, read back from the
        /// broker's retained topics (``RetainedState``). It fills only the devices and district
        /// phases the engine does not know: what it knows came from the journal, which holds
        /// every decision before its announcement and so is never older than the broker. Each
        /// one taken is persisted. Before `start` only; ignored afterwards.
        case restore(devices: DeviceTable, districts: [String: String])
        /// The time now (seconds since 1970), from the daemon's clock: every device whose last
        /// fix is older than ``Settings/forgetAfter`` is forgotten, its retained state and
        /// discovery configs cleared with empty retained messages.
        case forget(now: Int)
    }

    /// What a publish is for: the daemon counts and logs by it, so it never parses a topic to decide.
    public enum PublishKind: Sendable, Hashable {
        case deviceState, deviceAlert, districtState, districtPhase, districtAlert, lamp, discovery, bridgeState
        /// The retained texts of one phase in one language (``Topics/texts(ruleSet:phase:lang:)``).
        case texts
        /// A device alert as an OwnTracks transition (``OwnTracksNotices``), right after the alert.
        case deviceTransition
        /// The retained OwnTracks card that names Ampel in a user's apps.
        case ownTracksCard

        /// A phase change announced on an `…/alert` topic.
        public var isAlert: Bool { self == .deviceAlert || self == .districtAlert }
        /// Announces a decision to people, exactly once: journaled with the decision, and sent
        /// again after a crash unless the witness after it is retained (decision 20).
        public var isAnnouncement: Bool { isAlert || self == .deviceTransition }
    }

    /// A change of what the engine remembers, for the journal.
    public enum Change: Sendable, Hashable {
        case device(key: String, record: DeviceRecord)
        case district(ags: String, phase: String)
        /// The device is forgotten (``Event/forget(now:)``): gone from the state, for good.
        case forgotten(key: String)
    }

    public enum Action: Sendable, Hashable {
        case publish(OutgoingMessage, kind: PublishKind)
        /// What the engine remembers changed. Comes before the publishes that announce it: the
        /// daemon makes it durable before it hands them over, so that a crash between the two
        /// neither repeats nor forgets an alert.
        case persist(Change)
        /// POST `payload` to webhook number `webhook` (``Settings/webhooks``): the alert just
        /// before it, in the webhook's language. The daemon queues it without waiting.
        case notify(webhook: Int, payload: [UInt8])
        /// A fix that was not applied, with the reason (counted by the daemon).
        case dropped(DropReason)
        /// A device's phase change that sent no alert, with the reason (counted by the daemon).
        case alertSuppressed(AlertSuppression)
        /// A signal could not be computed (bad incidence in the data); logged by the daemon.
        case problem(String)
        /// Publish `bridge/info` now (its counters live in the daemon).
        case publishInfo
        /// Keep `scopes` as what may be announced on the broker (``DiscoveryScopeFile``): at
        /// once, before the publishes after it (`whenTaken` false), or once the broker has
        /// taken the publishes before it (`true`: the removals it records as done).
        case recordDiscovery([DiscoveryScope], whenTaken: Bool)
        /// Keep `shape` as what is retained on the broker (``PublishedShapeFile``), once the
        /// broker has taken the publishes before it.
        case recordShape(PublishedShape)
        /// More device states of recovery `generation` are due: send
        /// ``Event/recoverDevices(generation:)`` once the inputs waiting now are handled.
        case continueRecovery(generation: Int)
        /// More devices of re-evaluation `generation` are due: send
        /// ``Event/reevaluateDevices(generation:)`` once the inputs waiting now are handled.
        case continueReevaluation(generation: Int)
    }

    public let settings: Settings
    public private(set) var dataset: Dataset
    public private(set) var stale: Bool
    public private(set) var devices: DeviceTable
    /// The current signal of every district of the region, in the default language.
    public private(set) var districtSignals: [String: Signal] = [:]
    /// The last published phase of every district (from the state file until `start`).
    public private(set) var districtPhases: [String: String]
    private var lampLooks: [String: LampDriver.Look] = [:]
    /// What each lamp last said about its availability; absent until it said anything.
    private var lampsOnline: [String: Bool] = [:]
    private var started = false
    /// The device keys a recovery still has to republish, from `next` on.
    private var recovery: (generation: Int, keys: [String], next: Int)?
    private var recoveries = 0
    /// The device keys a re-evaluation after new data still has to look at, from `next` on.
    private var reevaluation: (generation: Int, keys: [String], next: Int, announce: Bool)?
    private var reevaluations = 0
    /// This run's shape while the start's walk republishes every device state into it; the
    /// walk that completes first records it.
    private var shapePending: PublishedShape?
    /// Devices whose latest fixes lie in a phase not confirmed yet (``Settings/minDwell``,
    /// ``Settings/maxFixAge``), by the key's bytes as in ``DeviceTable``. Not persisted: a
    /// restart starts the dwell again with the next fix (decision 32).
    private var pending: [[UInt8]: PendingPhase] = [:]
    /// The prefixes and nodes whose device entities the start's device walk removes.
    private var retiringDevices: [DiscoveryTopics] = []
    /// The OwnTracks users whose card went out in this run: sent again after each reconnect.
    private var cardUsers: Set<String> = []
    /// The texts topic of each phase, by language and phase id; empty with texts in the states.
    private let textsTopics: [String: [String: String]]
    /// The signal of each place and language under the data in force, with its state JSON,
    /// as fixes ask for them; emptied when the data or its staleness changes. Bounded by the
    /// geometry's districts (and `abroad`) times the languages.
    private var signalCache: [SignalKey: ShownSignal] = [:]

    /// What each lamp was last told (absent before its first command) and last said about
    /// its availability (absent before it said anything), for the status view.
    public var lampLooksSent: [String: LampDriver.Look] { lampLooks }
    public var lampAvailability: [String: Bool] { lampsOnline }

    /// A recovery's device batches are under way.
    public var isRecovering: Bool { recovery != nil }
    /// A re-evaluation's device batches are under way.
    public var isReevaluating: Bool { reevaluation != nil }

    public init(settings: Settings, dataset: Dataset, stale: Bool, restored: PersistedState = PersistedState()) {
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

    /// What the state directory should hold now.
    public var persisted: PersistedState { PersistedState(devices: devices, districts: districtPhases) }

    public mutating func event(_ event: Event) -> [Action] {
        switch event {
        case .start:
            started = true
            var actions = retireDiscovery()
            actions += retireShape()
            // Before the states that name them.
            actions += texts()
            actions += evaluateAll(initial: true, announce: true)
            actions += districtDiscovery()
            actions += lamps(force: true)
            return actions + nextReevaluationBatch()
        case .fix(let fix, let place, let receivedAt):
            return apply(fix, place: place, receivedAt: receivedAt)
        case .data(let dataset, let stale):
            // Every check of the source reports the data in force (a 304 too): the same
            // publication with the same staleness changes no signal, and walking 100,000
            // devices for it each check cost a core at a 1 s refresh.
            if started, stale == self.stale, dataset == self.dataset, dataset.courses == self.dataset.courses { return [] }
            self.dataset = dataset
            self.stale = stale
            signalCache.removeAll()
            guard started else { return [] }
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
        guard started, let forgetAfter = settings.forgetAfter else { return [] }
        var actions: [Action] = []
        var ownTracksUsers: Set<String> = []
        for key in devices.keys(heardBefore: now - Int(forgetAfter.components.seconds)) {
            if devices[key]?.owntracks == true { ownTracksUsers.insert(OwnTracksNotices.user(of: key)) }
            devices[key] = nil
            pending[Array(key.utf8)] = nil
            actions.append(.persist(.forgotten(key: key)))
            // The entities go before their state: Home Assistant, still subscribed, rendered the
            // emptied state with the entity's template ("'value_json' is undefined").
            if let discovery = settings.discovery, discovery.scope.devices {
                actions += discovery.names.removals(device: key).map { .publish($0, kind: .discovery) }
            }
            actions.append(.publish(OutgoingMessage(topic: settings.topics.deviceState(key), payload: [], qos: 1, retain: true), kind: .deviceState))
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
            return .publish(OutgoingMessage(topic: owntracks.infoTopic(user: user), payload: [], qos: 1, retain: true), kind: .ownTracksCard)
        }
    }

    // MARK: Restoring from the broker

    /// Takes the devices and district phases the engine does not know; a `.persist` for each.
    ///
    /// Before `start`, so that its re-evaluation compares the data in force with the phases
    /// last announced, as it does for a state read from the file: an alert only for a change.
    mutating func restore(_ found: DeviceTable, districts: [String: String]) -> [Action] {
        guard !started else { return [] }
        var actions: [Action] = []
        found.forEach { key, record in
            guard devices[key] == nil else { return }
            var record = record
            // The state names the language it was written in; a device that never asked for
            // one keeps following the default (and its configuration) rather than being pinned.
            if record.lang == language(device: key, messageLang: nil).rawValue { record.lang = nil }
            devices[key] = record
            actions.append(.persist(.device(key: key, record: record)))
        }
        let region = Set(dataset.districts(in: settings.region).map(\.district.ags))
        for (ags, phase) in districts.sorted(by: { $0.key < $1.key }) where districtPhases[ags] == nil && region.contains(ags) {
            districtPhases[ags] = phase
            actions.append(.persist(.district(ags: ags, phase: phase)))
        }
        return actions
    }

    // MARK: Recovery after a reconnect

    /// The broker may have lost every retained message (a crash without persistence) or hold
    /// the Last Will's `offline`: say `online` first, then publish again what the daemon keeps
    /// retained, byte for byte what it published last. Device states come in batches.
    mutating func reconnected() -> [Action] {
        // Before the start nothing was published; the start publishes everything.
        guard started else { return [] }
        var actions: [Action] = [
            .publish(OutgoingMessage(topic: settings.topics.bridgeState, text: BridgeState.online, qos: 1, retain: true), kind: .bridgeState),
            .publishInfo,
        ]
        actions += texts()
        let districts = settings.publishDistricts ? dataset.districts(in: settings.region) : []
        for entry in districts {
            let ags = entry.district.ags
            guard let signal = districtSignals[ags] else { continue }
            actions.append(.publish(districtState(ags, signal), kind: .districtState))
            actions.append(.publish(OutgoingMessage(topic: settings.topics.districtPhase(ags), text: districtPhases[ags] ?? signal.phase,
                                                    qos: 1, retain: true),
                                    kind: .districtPhase))
        }
        actions += districtDiscovery()
        actions += lamps(force: true)
        if let owntracks = settings.owntracks {
            actions += cardUsers.sorted().map { .publish(owntracks.card(user: $0), kind: .ownTracksCard) }
        }
        recoveries += 1
        recovery = (recoveries, devices.keys, 0)
        return actions + nextRecoveryBatch()
    }

    /// Up to ``Settings/recoveryBatch`` devices: discovery config and state as last published
    /// (the record holds the position, time, language and the signal's data day and staleness).
    mutating func nextRecoveryBatch() -> [Action] {
        guard var current = recovery else { return [] }
        var actions: [Action] = []
        let end = min(current.keys.count, current.next + settings.recoveryBatch)
        for key in current.keys[current.next..<end] {
            // A device the re-evaluation after new data has not reached yet is brought up to
            // that data here, alert first: a republished state in the new phase without its
            // alert would pass for the alert's witness after a crash (decision 27).
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
        current.next = end
        if end < current.keys.count {
            recovery = current
            actions.append(.continueRecovery(generation: current.generation))
        } else {
            recovery = nil
        }
        return actions
    }

    // MARK: Devices

    mutating func apply(_ fix: LocationFix, place: Place, receivedAt: Int) -> [Action] {
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
        // The signal the record takes: the fix's own, or the one last announced while a move
        // into another phase waits to be confirmed.
        var chosen = here
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
                do {
                    chosen = try shownSignal(at: previous.district.map { .district(ags: $0.ags, name: $0.name) } ?? .abroad, language: language)
                } catch {
                    return actions + [.problem(error.message)]
                }
            }
        } else if !inaccurate, let left = pending.removeValue(forKey: pendingKey), left.fresh, left.phase != signal.phase {
            // Back in the phase last announced (or in another district of it) before the dwell was met.
            actions.append(.alertSuppressed(.dwell))
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
        // the state is the alert's witness across a crash (decision 20).
        let publishState = alerting
            || stateDue(key: key, previous: previous, record, language: language, lastPublished: known?.statePublished, now: receivedAt)
        devices.set(key, record, statePublished: publishState ? receivedAt : known?.statePublished)
        actions.append(.persist(.device(key: key, record: record)))
        if previous == nil { actions += deviceDiscovery(key) }
        actions += ownTracksCard(key, record)
        // The alert before the state: the retained state then witnesses that the broker took
        // the alert (one connection, in order), which a restart checks before sending it again.
        if alerting {
            actions.append(.publish(deviceAlert(key, from: announced?.phase, shown), kind: .deviceAlert))
            actions += ownTracksTransition(key, record, shown, tst: record.tst, accuracy: fix.accuracy.map { Int(min($0, 1e6).rounded()) } ?? 0)  // `acc` may be any finite distance
            actions += notifications(device: key, district: shown.district.map { ($0.ags, $0.name) }, from: announced?.phase, shown)
        }
        if publishState { actions.append(.publish(deviceState(key, record, state), kind: .deviceState)) }
        if started {
            actions += lamps(force: false, device: key)
        }
        return actions
    }

    /// Whether a fix republishes the device's state: always with `every_fix`; with `on_change`
    /// when a consumer would see something new (phase, district, staleness, data day,
    /// language; the rule set is one per run and a restart publishes each device's first fix),
    /// or when the retained one is a heartbeat old. A phase change is always one: the state
    /// after an alert is its witness (decision 20).
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

    /// The signal for a district (code and the geometry's name), `nil` for no German district:
    /// ``RuleSet/signal(atDistrict:placeName:dataset:region:language:stale:directory:)``, the one
    /// path from a position to a signal that `ampel check` takes too.
    func signal(at district: (ags: String, name: String)?, language: Language) throws(SignalError) -> Signal {
        try settings.ruleSet.signal(atDistrict: district?.ags, placeName: district?.name, dataset: dataset,
                                    region: settings.region, language: language, stale: stale)
    }

    func deviceState(_ key: String, _ record: DeviceRecord, _ signal: Signal) -> OutgoingMessage {
        deviceState(key, record, Signal.StateJSON(signal, texts: textsTopic(signal)))
    }

    func deviceState(_ key: String, _ record: DeviceRecord, _ state: Signal.StateJSON) -> OutgoingMessage {
        let fields = Signal.DeviceFields(device: key, lat: record.lat, lon: record.lon, tst: record.tst)
        return OutgoingMessage(topic: settings.topics.deviceState(key), payload: state.json(device: fields), qos: 1, retain: true)
    }

    /// What ``signalCache`` holds for a place and language.
    struct SignalKey: Hashable {
        var place: Place
        var language: Language
    }

    /// A signal with the pieces of its state JSON.
    struct ShownSignal {
        var signal: Signal
        var state: Signal.StateJSON
    }

    /// ``signal(at:language:)`` for a fix's place, from ``signalCache`` once asked for.
    mutating func shownSignal(at place: Place, language: Language) throws(SignalError) -> ShownSignal {
        let key = SignalKey(place: place, language: language)
        if let cached = signalCache[key] { return cached }
        let signal = try signal(at: place.district, language: language)
        let shown = ShownSignal(signal: signal, state: Signal.StateJSON(signal, texts: textsTopic(signal)))
        signalCache[key] = shown
        return shown
    }

    func districtState(_ ags: String, _ signal: Signal) -> OutgoingMessage {
        OutgoingMessage(topic: settings.topics.districtState(ags), payload: signal.json(texts: textsTopic(signal)), qos: 1, retain: true)
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
                actions.append(.publish(OutgoingMessage(topic: topic, payload: signal.textsJSON(), qos: 1, retain: true), kind: .texts))
            }
        }
        return actions
    }

    /// The alert on the device's topic, with the one-line `message` and `priority` webhooks get.
    func deviceAlert(_ key: String, from: String?, _ signal: Signal) -> OutgoingMessage {
        OutgoingMessage(topic: settings.topics.deviceAlert(key),
                        payload: signal.alertJSON(device: key, from: from, push: Self.push(signal, who: settings.devices[key]?.name ?? key)),
                        qos: 1, retain: false, expiry: settings.alertExpiry)
    }

    // MARK: Webhooks

    /// A device alert for every webhook that wants it, each in the webhook's language (the
    /// device's own when it names none).
    func notifications(device key: String, district: (ags: String, name: String)?, from: String?, _ signal: Signal) -> [Action] {
        guard !settings.webhooks.isEmpty else { return [] }
        let who = settings.devices[key]?.name ?? key
        return notifications(from: from, signal, wanted: { $0.wants(device: key) }, device: key, who: who) { (language) throws(SignalError) in
            try self.signal(at: district, language: language)
        }
    }

    /// A district alert for every webhook that wants it.
    func notifications(district ags: String, from: String, _ signal: Signal,
                       signalIn: (Language) throws(SignalError) -> Signal) -> [Action] {
        guard !settings.webhooks.isEmpty else { return [] }
        return notifications(from: from, signal, wanted: { $0.wants(district: ags) }, device: nil, who: nil, signalIn: signalIn)
    }

    private func notifications(from: String?, _ signal: Signal, wanted: (WebhookSettings) -> Bool, device: String?, who: String?,
                               signalIn: (Language) throws(SignalError) -> Signal) -> [Action] {
        var actions: [Action] = []
        var payloads: [Language: [UInt8]] = [:]
        for (index, webhook) in settings.webhooks.enumerated() where wanted(webhook) {
            let language = webhook.language ?? Language(rawValue: signal.lang) ?? settings.defaultLanguage
            if payloads[language] == nil {
                // The same place and data as the alert: a signal in another language cannot
                // fail where this one did not; if it did, the alert's own language goes.
                let translated = language.rawValue == signal.lang ? signal : ((try? signalIn(language)) ?? signal)
                payloads[language] = translated.alertJSON(device: device, from: from, push: Self.push(translated, who: who))
            }
            actions.append(.notify(webhook: index, payload: payloads[language] ?? []))
        }
        return actions
    }

    /// The webhook body's `message` (who, where, the phase's title) and `priority` (Gotify's
    /// 0-10 scale: the darker the phase, the higher; `outside` and green like a notice).
    static func push(_ signal: Signal, who: String?) -> Signal.PushFields {
        let parts = [who, signal.district?.name, signal.title].compactMap { $0 }
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
    /// state that witnesses both (decision 20).
    func ownTracksTransition(_ key: String, _ record: DeviceRecord, _ signal: Signal, tst: Int, accuracy: Int = 0) -> [Action] {
        guard record.owntracks, let owntracks = settings.owntracks else { return [] }
        return [.publish(owntracks.transition(key: key, record: record, signal: signal, tst: tst, accuracy: accuracy, expiry: settings.alertExpiry),
                         kind: .deviceTransition)]
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
            if previousPhase != signal.phase { actions.append(.persist(.district(ags: ags, phase: signal.phase))) }
            // A district's first phase ever is no change: 96 alerts on a fresh install would be
            // noise. The alert goes first: the retained phase after it is its witness.
            defer {
                districtSignals[ags] = signal
                districtPhases[ags] = signal.phase
            }
            guard settings.publishDistricts else { continue }
            if let previousPhase, previousPhase != signal.phase {
                actions.append(.publish(OutgoingMessage(topic: settings.topics.districtAlert(ags),
                                                        payload: signal.alertJSON(device: nil, from: previousPhase, push: Self.push(signal, who: nil)),
                                                        qos: 1, retain: false, expiry: settings.alertExpiry),
                                        kind: .districtAlert))
                actions += notifications(district: ags, from: previousPhase, signal) { (language) throws(SignalError) in
                    try settings.ruleSet.signal(for: entry, dataDate: dataset.date, language: language, stale: stale, course: dataset.courses[ags])
                }
            }
            if initial || previousSignal != signal {
                actions.append(.publish(districtState(ags, signal), kind: .districtState))
            }
            if initial || previousPhase != signal.phase {
                actions.append(.publish(OutgoingMessage(topic: settings.topics.districtPhase(ags), text: signal.phase, qos: 1, retain: true),
                                        kind: .districtPhase))
            }
        }
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
            actions.append(.publish(OutgoingMessage(topic: settings.topics.districtState(ags), payload: [], qos: 1, retain: true), kind: .districtState))
            actions.append(.publish(OutgoingMessage(topic: settings.topics.districtPhase(ags), payload: [], qos: 1, retain: true), kind: .districtPhase))
        }
        return actions
    }

    /// Starts a walk over every device (``nextReevaluationBatch()``), replacing one under way;
    /// with `announce`, each device's discovery config goes out too (and keeps going out if
    /// the walk it replaces was announcing: its later devices had not had theirs yet).
    mutating func startDeviceWalk(announce: Bool) {
        reevaluations += 1
        let announce = settings.discovery != nil && (announce || reevaluation?.announce == true)
        // The table's own order: a copy-on-write copy, where sorting 1,000,000 keys took seconds.
        reevaluation = (reevaluations, devices.keys, 0, announce)
    }

    /// Up to ``Settings/recoveryBatch`` devices of the re-evaluation: an alert where the phase
    /// changed, the state where phase, data day or staleness changed.
    mutating func nextReevaluationBatch() -> [Action] {
        guard var current = reevaluation else { return [] }
        var actions: [Action] = []
        let end = min(current.keys.count, current.next + settings.recoveryBatch)
        for key in current.keys[current.next..<end] {
            if devices[key] != nil {
                for names in retiringDevices { actions += names.removals(device: key).map { .publish($0, kind: .discovery) } }
                if current.announce { actions += deviceDiscovery(key) }
            }
            reevaluate(key, into: &actions, republish: shapePending != nil)
        }
        current.next = end
        if end < current.keys.count {
            reevaluation = current
            actions.append(.continueReevaluation(generation: current.generation))
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
            signal = try self.signal(at: record.district.map { ($0.ags, $0.name) }, language: language)
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
            actions.append(.persist(.device(key: key, record: record)))
        }
        if previousPhase != signal.phase, !record.announced {
            // Its only positions are old fixes: nobody was told its phase, and a change of the
            // phase where it was is no news either. Its first fresh fix alerts (``apply``).
            actions.append(.alertSuppressed(.oldFix))
        } else if previousPhase != signal.phase {
            actions += ownTracksCard(key, record)
            actions.append(.publish(deviceAlert(key, from: previousPhase, signal), kind: .deviceAlert))
            // New data moved the device, not a fix: the transition happened when that data
            // took effect, not at the device's last fix (which may be days old).
            let dataStart = OwnTracksNotices.dayStart(signal.dataDate) ?? record.tst
            actions += ownTracksTransition(key, record, signal, tst: max(record.tst, dataStart))
            actions += notifications(device: key, district: record.district.map { ($0.ags, $0.name) }, from: previousPhase, signal)
        }
        actions.append(.publish(deviceState(key, record, signal), kind: .deviceState))
        if started, previousPhase != signal.phase { actions += lamps(force: false, device: key) }
        return .changed
    }

    // MARK: Discovery

    /// The bridge's and the districts' discovery configs; the devices' go out with the device walk.
    func districtDiscovery() -> [Action] {
        guard let discovery = settings.discovery, settings.publishDistricts else { return [] }
        let configs = discovery.bridge() + dataset.districts(in: settings.region).flatMap {
            discovery.district(ags: $0.district.ags, name: $0.district.name)
        }
        return configs.map { .publish($0, kind: .discovery) }
    }

    /// A device's discovery configs (none with discovery off or without the devices).
    func deviceDiscovery(_ key: String) -> [Action] {
        guard let discovery = settings.discovery else { return [] }
        return discovery.device(key: key, name: settings.devices[key]?.name).map { .publish($0, kind: .discovery) }
    }

    /// What this run announces, as the scope file keeps it.
    var currentDiscovery: [DiscoveryScope] { settings.discovery.map { [$0.scope] } ?? [] }

    /// At start: empty configs for what earlier runs announced and this one does not (the
    /// bridge and districts at once, the devices' with the start's device walk), and the
    /// scopes to keep. While removals are under way the file names the old scopes and the
    /// new one, so a crash in between leaves nothing announced that the next start forgets.
    mutating func retireDiscovery() -> [Action] {
        let announced = settings.announcedDiscovery
        let current = settings.discovery?.scope
        let districts = dataset.districts(in: settings.region).map(\.district.ags)
        var removals: [Action] = []
        for old in announced where old != current {
            let left = old.leftBehind(by: current)
            let names = DiscoveryTopics(prefix: old.prefix, node: old.node)
            if left.districts { removals += names.removals(bridgeAndDistricts: districts).map { .publish($0, kind: .discovery) } }
            if left.devices, !retiringDevices.contains(names) { retiringDevices.append(names) }
        }
        guard !removals.isEmpty || !retiringDevices.isEmpty else {
            return announced == currentDiscovery ? [] : [.recordDiscovery(currentDiscovery, whenTaken: false)]
        }
        var both = announced
        if let current, !both.contains(current) { both.append(current) }
        var actions: [Action] = both == announced ? [] : [.recordDiscovery(both, whenTaken: false)]
        actions += removals
        if retiringDevices.isEmpty { actions.append(.recordDiscovery(currentDiscovery, whenTaken: true)) }
        return actions
    }

    /// This run's ``PublishedShape``.
    var currentShape: PublishedShape {
        PublishedShape(base: settings.topics.base, ruleSet: settings.ruleSet.id, textsInState: settings.outputs.textsInState,
                       defaultLanguage: settings.defaultLanguage,
                       deviceLanguages: settings.devices.compactMapValues(\.lang), texts: textsTopics.values.flatMap(\.values))
    }

    /// At start: empty retained payloads for the texts topics the last run retained and this one
    /// does not, and, when the states' shape differs, every device's state again in the start's
    /// walk (recorded when a walk completes; at once without devices). Partitioned instances
    /// share the texts topics under their one base topic: only the one with the district topics
    /// (``Settings/publishDistricts``) empties them, so that another's states keep theirs.
    mutating func retireShape() -> [Action] {
        let current = currentShape
        guard let before = settings.publishedShape, before != current else { return [] }
        let kept = Set(current.texts)
        var actions: [Action] = settings.publishDistricts ? before.texts.filter { !kept.contains($0) }.map {
            .publish(OutgoingMessage(topic: $0, text: "", qos: 1, retain: true), kind: .texts)
        } : []
        if before.fingerprint != current.fingerprint, devices.count > 0 {
            shapePending = current
        } else {
            actions.append(.recordShape(current))
        }
        return actions
    }

    // MARK: Lamps

    /// What `lamp` should show now; `nil` for a device never seen.
    func look(for lamp: LampSettings) -> LampDriver.Look? {
        let phase: String
        switch lamp.follows {
        case .district(let ags):
            if let signal = districtSignals[ags] {
                phase = signal.phase
            } else {
                // A district outside the region (or unknown to the data) shows `outside`.
                phase = OutsideMarker.id
            }
        case .device(let key):
            guard let record = devices[key] else { return nil }
            phase = record.phase
        }
        let ruleSet = settings.ruleSet
        if let id = PhaseID(phase), let rules = ruleSet.rules(for: id) {
            return LampDriver.Look(color: rules.color, blink: id == .darkred)
        }
        return LampDriver.Look(color: ruleSet.outside.color, blink: false)
    }

    /// Commands for lamps whose look changed (all of them when `force`), optionally only those
    /// following `device`, or only the lamp `name` (which came online).
    mutating func lamps(force: Bool, device: String? = nil, named name: String? = nil) -> [Action] {
        var actions: [Action] = []
        for lamp in settings.lamps {
            if let device, lamp.follows != .device(device) { continue }
            if let name, lamp.name != name { continue }
            guard let look = look(for: lamp) else { continue }
            if !force, lampLooks[lamp.name] == look { continue }
            lampLooks[lamp.name] = look
            actions += LampDriver.commands(for: lamp, look: look).map { .publish($0, kind: .lamp) }
        }
        return actions
    }
}
