import AmpelCore
import AmpelDomain
import AmpelMessages

extension SignalEngine {
    enum Event: Sendable {
        /// Publish everything once: district topics, re-evaluated devices, discovery, lamps.
        case start
        /// A position; `receivedAt` (seconds since 1970) stands in for a missing `tst`.
        case fix(LocationFix, place: Signal.DistrictRef?, receivedAt: Int)
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
    enum PublishKind: Sendable, Hashable {
        case deviceState, deviceAlert, districtState, districtPhase, districtAlert, lamp, discovery, bridgeState
        /// The retained texts of one phase in one language (``Topics/texts(ruleSet:phase:lang:)``).
        case texts
        /// A state's retained indicators (``Topics/stateReport(_:)``).
        case stateReport
        /// A device alert as an OwnTracks transition (``OwnTracksNotices``), right after the alert.
        case deviceTransition
        /// The retained OwnTracks card that names Ampel in a user's apps.
        case ownTracksCard
        /// A device alert again, for Home Assistant's event entity (``Decision/HomeAssistantEvent``).
        case homeAssistantEvent

        /// A phase change announced on an `…/alert` topic.
        var isAlert: Bool { self == .deviceAlert || self == .districtAlert }
    }

    /// A change of what the engine remembers, for the journal.
    enum Change: Sendable, Hashable {
        case device(key: String, record: DeviceRecord)
        case district(ags: String, phase: String)
        /// The device is forgotten (``Event/forget(now:)``): gone from the state, for good.
        case forgotten(key: String)
    }

    enum Action: Sendable, Hashable {
        /// A publish that announces nothing and witnesses nothing.
        case publish(OutgoingMessage, kind: PublishKind)
        /// What the engine remembers changed, with what announces it (``Decision``): the daemon
        /// makes it durable before it hands any announcement over, so that a crash between the
        /// two neither repeats nor forgets an alert.
        case decide(Decision)
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
}

extension SignalEngine.Action {
    static func publish(_ publish: Publish) -> Self { .publish(publish.message, kind: publish.kind) }
}
