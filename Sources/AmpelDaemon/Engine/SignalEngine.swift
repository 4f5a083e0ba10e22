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
}

extension DeviceRecord {
    // A state file written before `owntracks` existed has no such member: the device is then
    // no OwnTracks phone until its next fix says so. The file writes it only when `true`.
    private enum CodingKeys: String, CodingKey {
        case lat, lon, tst, lang, district, phase, dataDate, stale, owntracks
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(lat: try c.decode(Double.self, forKey: .lat), lon: try c.decode(Double.self, forKey: .lon),
                  tst: try c.decode(Int.self, forKey: .tst), lang: try c.decodeIfPresent(String.self, forKey: .lang),
                  district: try c.decodeIfPresent(Signal.DistrictRef.self, forKey: .district),
                  phase: try c.decode(String.self, forKey: .phase), dataDate: try c.decode(String.self, forKey: .dataDate),
                  stale: try c.decode(Bool.self, forKey: .stale),
                  owntracks: try c.decodeIfPresent(Bool.self, forKey: .owntracks) ?? false)
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
        /// Alerts to the OwnTracks apps of devices that report as `owntracks/<user>/<device>`;
        /// `nil` for none (`notify.owntracks: false`).
        public var owntracks: OwnTracksNotices?
        /// Devices republished per batch after a reconnect (state and discovery config each),
        /// and devices re-evaluated (and announced) per batch after new data and at start; the
        /// daemon handles what arrived in between before it asks for the next batch. A fix that
        /// arrives meanwhile waits for at most one batch: 500 devices' configs and states take
        /// about 10 ms to build (2,000 held fixes back 40 ms at 1,000,000 devices).
        public var recoveryBatch: Int

        public init(ruleSet: RuleSet, region: Region = .bavaria, topics: Topics = Topics(), defaultLanguage: Language = .en,
                    devices: [String: DaemonConfiguration.DeviceSettings] = [:], alertExpiry: Duration? = .seconds(3600),
                    lamps: [LampSettings] = [], discovery: Discovery? = nil, owntracks: OwnTracksNotices? = nil, recoveryBatch: Int = 500) {
            self.ruleSet = ruleSet
            self.region = region
            self.topics = topics
            self.defaultLanguage = defaultLanguage
            self.devices = devices
            self.alertExpiry = alertExpiry
            self.lamps = lamps
            self.discovery = discovery
            self.owntracks = owntracks
            self.recoveryBatch = max(1, recoveryBatch)
        }
    }

    public enum Event: Sendable {
        /// Publish everything once: district topics, re-evaluated devices, discovery, lamps.
        case start
        /// A position; `receivedAt` (seconds since 1970) stands in for a missing `tst`.
        case fix(LocationFix, place: Place, receivedAt: Int)
        /// A dataset (a new publication, or the same one with another staleness).
        case data(Dataset, stale: Bool)
        /// A lamp reported online: send its colour again.
        case lampOnline(name: String)
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
    }

    /// What a publish is for: the daemon counts and logs by it, so it never parses a topic to decide.
    public enum PublishKind: Sendable, Hashable {
        case deviceState, deviceAlert, districtState, districtPhase, districtAlert, lamp, discovery, bridgeState
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
    }

    public enum Action: Sendable, Hashable {
        case publish(OutgoingMessage, kind: PublishKind)
        /// What the engine remembers changed. Comes before the publishes that announce it: the
        /// daemon makes it durable before it hands them over, so that a crash between the two
        /// neither repeats nor forgets an alert.
        case persist(Change)
        /// A fix that was not applied, with the reason (counted by the daemon).
        case dropped(DropReason)
        /// A signal could not be computed (bad incidence in the data); logged by the daemon.
        case problem(String)
        /// Publish `bridge/info` now (its counters live in the daemon).
        case publishInfo
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
    private var started = false
    /// The device keys a recovery still has to republish, from `next` on.
    private var recovery: (generation: Int, keys: [String], next: Int)?
    private var recoveries = 0
    /// The device keys a re-evaluation after new data still has to look at, from `next` on.
    private var reevaluation: (generation: Int, keys: [String], next: Int, announce: Bool)?
    private var reevaluations = 0
    /// The OwnTracks users whose card went out in this run: sent again after each reconnect.
    private var cardUsers: Set<String> = []

    /// A recovery's device batches are under way.
    public var isRecovering: Bool { recovery != nil }
    /// A re-evaluation's device batches are under way.
    public var isReevaluating: Bool { reevaluation != nil }

    public init(settings: Settings, dataset: Dataset, stale: Bool, restored: PersistedState = PersistedState()) {
        self.settings = settings
        self.dataset = dataset
        self.stale = stale
        self.devices = restored.devices
        self.districtPhases = restored.districts
    }

    /// What the state directory should hold now.
    public var persisted: PersistedState { PersistedState(devices: devices, districts: districtPhases) }

    public mutating func event(_ event: Event) -> [Action] {
        switch event {
        case .start:
            started = true
            var actions = evaluateAll(initial: true, announce: true)
            actions += districtDiscovery()
            actions += lamps(force: true)
            return actions + nextReevaluationBatch()
        case .fix(let fix, let place, let receivedAt):
            return apply(fix, place: place, receivedAt: receivedAt)
        case .data(let dataset, let stale):
            self.dataset = dataset
            self.stale = stale
            guard started else { return [] }
            return evaluateAll(initial: false) + lamps(force: false) + nextReevaluationBatch()
        case .lampOnline(let name):
            guard let lamp = settings.lamps.first(where: { $0.name == name }), let look = look(for: lamp) else { return [] }
            lampLooks[lamp.name] = look
            return LampDriver.commands(for: lamp, look: look).map { .publish($0, kind: .lamp) }
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
        let districts = dataset.districts(in: settings.region)
        for entry in districts {
            let ags = entry.district.ags
            guard let signal = districtSignals[ags] else { continue }
            actions.append(.publish(OutgoingMessage(topic: settings.topics.districtState(ags), payload: signal.json(), qos: 1, retain: true),
                                    kind: .districtState))
            actions.append(.publish(OutgoingMessage(topic: settings.topics.districtPhase(ags), text: districtPhases[ags] ?? signal.phase,
                                                    qos: 1, retain: true),
                                    kind: .districtPhase))
        }
        if let discovery = settings.discovery {
            for entry in districts {
                actions.append(.publish(discovery.district(ags: entry.district.ags, name: entry.district.name), kind: .discovery))
            }
        }
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
            let outcome = reevaluate(key, into: &reevaluated)
            // A device whose signal cannot be computed had none published for this data either.
            if case .noSignal = outcome {
                actions += reevaluated
                continue
            }
            if let discovery = settings.discovery {
                actions.append(.publish(discovery.device(key: key, name: settings.devices[key]?.name), kind: .discovery))
            }
            switch outcome {
            case .changed, .noSignal: actions += reevaluated
            case .unchanged(let record, let signal): actions.append(.publish(deviceState(key, record, signal), kind: .deviceState))
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
        let previous = devices[key]
        if let previous, let tst = fix.tst, tst < previous.tst {
            return [.dropped(.outOfOrder)]
        }
        let messageLang = fix.lang ?? previous?.lang
        let language = self.language(device: key, messageLang: messageLang)
        let signal: Signal
        do {
            signal = try self.signal(at: place.district, language: language)
        } catch {
            return [.problem(error.message)]
        }
        // The signal names the district as the data knows it (the geometry's name where the data does not).
        let record = DeviceRecord(lat: fix.latitude, lon: fix.longitude, tst: fix.tst ?? receivedAt, lang: messageLang,
                                  district: signal.district, phase: signal.phase, dataDate: signal.dataDate, stale: signal.stale,
                                  owntracks: fix.owntracks)
        devices[key] = record
        var actions: [Action] = [.persist(.device(key: key, record: record))]
        if previous == nil, let discovery = settings.discovery {
            actions.append(.publish(discovery.device(key: key, name: settings.devices[key]?.name), kind: .discovery))
        }
        actions += ownTracksCard(key, record)
        // The alert before the state: the retained state then witnesses that the broker took
        // the alert (one connection, in order), which a restart checks before sending it again.
        if previous?.phase != signal.phase {
            actions.append(.publish(deviceAlert(key, from: previous?.phase, signal), kind: .deviceAlert))
            actions += ownTracksTransition(key, record, signal, tst: record.tst)
        }
        actions.append(.publish(deviceState(key, record, signal), kind: .deviceState))
        if started {
            actions += lamps(force: false, device: key)
        }
        return actions
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
        let fields = Signal.DeviceFields(device: key, lat: record.lat, lon: record.lon, tst: record.tst)
        return OutgoingMessage(topic: settings.topics.deviceState(key), payload: signal.json(device: fields), qos: 1, retain: true)
    }

    func deviceAlert(_ key: String, from: String?, _ signal: Signal) -> OutgoingMessage {
        OutgoingMessage(topic: settings.topics.deviceAlert(key), payload: signal.alertJSON(device: key, from: from),
                        qos: 1, retain: false, expiry: settings.alertExpiry)
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
    func ownTracksTransition(_ key: String, _ record: DeviceRecord, _ signal: Signal, tst: Int) -> [Action] {
        guard record.owntracks, let owntracks = settings.owntracks else { return [] }
        return [.publish(owntracks.transition(key: key, record: record, signal: signal, tst: tst, expiry: settings.alertExpiry),
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
                signal = try settings.ruleSet.signal(for: entry, dataDate: dataset.date, language: language, stale: stale)
            } catch {
                actions.append(.problem(error.message))
                continue
            }
            let previousSignal = districtSignals[ags]
            let previousPhase = districtPhases[ags]
            if previousPhase != signal.phase { actions.append(.persist(.district(ags: ags, phase: signal.phase))) }
            // A district's first phase ever is no change: 96 alerts on a fresh install would be
            // noise. The alert goes first: the retained phase after it is its witness.
            if let previousPhase, previousPhase != signal.phase {
                actions.append(.publish(OutgoingMessage(topic: settings.topics.districtAlert(ags),
                                                        payload: signal.alertJSON(device: nil, from: previousPhase),
                                                        qos: 1, retain: false, expiry: settings.alertExpiry),
                                        kind: .districtAlert))
            }
            if initial || previousSignal != signal {
                actions.append(.publish(OutgoingMessage(topic: settings.topics.districtState(ags), payload: signal.json(), qos: 1, retain: true),
                                        kind: .districtState))
            }
            if initial || previousPhase != signal.phase {
                actions.append(.publish(OutgoingMessage(topic: settings.topics.districtPhase(ags), text: signal.phase, qos: 1, retain: true),
                                        kind: .districtPhase))
            }
            districtSignals[ags] = signal
            districtPhases[ags] = signal.phase
        }
        // Devices in batches, like a recovery: a new publication that changes 1,000,000 devices
        // must not hand the daemon 1,000,000 publishes at once, nor hold up live fixes behind
        // them. A device whose fix comes before its batch is evaluated against the new data
        // then, and its batch finds nothing left to do.
        startDeviceWalk(announce: announce)
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
            if current.announce, let discovery = settings.discovery, devices[key] != nil {
                actions.append(.publish(discovery.device(key: key, name: settings.devices[key]?.name), kind: .discovery))
            }
            reevaluate(key, into: &actions)
        }
        current.next = end
        if end < current.keys.count {
            reevaluation = current
            actions.append(.continueReevaluation(generation: current.generation))
        } else {
            reevaluation = nil
        }
        return actions
    }

    /// What ``reevaluate(_:into:)`` found.
    enum Reevaluation {
        /// Phase, data day or staleness changed: the state (and an alert) are in the actions.
        case changed
        /// Nothing to publish: the record and its signal under the data in force, for a caller
        /// that republishes it.
        case unchanged(DeviceRecord, Signal)
        /// No such device, or no signal for it (the problem is in the actions).
        case noSignal
    }

    /// Brings device `key` up to the data in force: an alert where its phase changed, its state
    /// where phase, data day or staleness changed.
    @discardableResult
    mutating func reevaluate(_ key: String, into actions: inout [Action]) -> Reevaluation {
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
        guard previousPhase != signal.phase || record.dataDate != signal.dataDate || record.stale != signal.stale else {
            return .unchanged(record, signal)
        }
        record.phase = signal.phase
        record.dataDate = signal.dataDate
        record.stale = signal.stale
        devices[key] = record
        actions.append(.persist(.device(key: key, record: record)))
        if previousPhase != signal.phase {
            actions += ownTracksCard(key, record)
            actions.append(.publish(deviceAlert(key, from: previousPhase, signal), kind: .deviceAlert))
            // New data moved the device, not a fix: the transition happened when that data
            // took effect, not at the device's last fix (which may be days old).
            let dataStart = OwnTracksNotices.dayStart(signal.dataDate) ?? record.tst
            actions += ownTracksTransition(key, record, signal, tst: max(record.tst, dataStart))
        }
        actions.append(.publish(deviceState(key, record, signal), kind: .deviceState))
        if started, previousPhase != signal.phase { actions += lamps(force: false, device: key) }
        return .changed
    }

    // MARK: Discovery

    /// The districts' discovery configs; the devices' go out with the device walk.
    func districtDiscovery() -> [Action] {
        guard let discovery = settings.discovery else { return [] }
        return dataset.districts(in: settings.region).map {
            .publish(discovery.district(ags: $0.district.ags, name: $0.district.name), kind: .discovery)
        }
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

    /// Commands for lamps whose look changed (all of them when `force`), optionally only those following `device`.
    mutating func lamps(force: Bool, device: String? = nil) -> [Action] {
        var actions: [Action] = []
        for lamp in settings.lamps {
            if let device, lamp.follows != .device(device) { continue }
            guard let look = look(for: lamp) else { continue }
            if !force, lampLooks[lamp.name] == look { continue }
            lampLooks[lamp.name] = look
            actions += LampDriver.commands(for: lamp, look: look).map { .publish($0, kind: .lamp) }
        }
        return actions
    }
}
