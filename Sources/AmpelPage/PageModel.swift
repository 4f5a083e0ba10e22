import AmpelCore
import AmpelDomain

/// What the daemon says about one district, as the page shows it.
///
/// Filled by the route glue from the daemon's published district states: the page never
/// classifies on its own.
public struct DistrictStatus: Sendable, Hashable {
    /// What the district's state says.
    public enum Phase: Sendable, Hashable {
        /// A phase of the rule set.
        case phase(PhaseID)
        /// The district lies outside the monitored region.
        case outside
        /// The data in force does not know the district.
        case noData

        /// The wire name (`green` … `darkred`, `outside`) or `none`.
        public var id: String {
            switch self {
            case .phase(let phase): phase.id
            case .outside: OutsideMarker.id
            case .noData: "none"
            }
        }
    }

    public var ags: String
    /// The RKI name, e.g. `SK München`.
    public var name: String
    public var incidence: Double?
    public var phase: Phase
    /// `#RRGGBB` from the rule set; `nil` for ``Phase/noData``.
    public var color: RGB?
    /// Why the phase is what it is (the signal's `reason`), for a set of state indicators.
    public var reason: String?

    public init(ags: String, name: String, incidence: Double?, phase: Phase, color: RGB?, reason: String? = nil) {
        self.ags = ags
        self.name = name
        self.incidence = incidence
        self.phase = phase
        self.color = color
        self.reason = reason
    }
}

/// What kind of data is in force: `bridge/info`'s `dataKind` (the daemon's `DataKind`), which
/// the page's badge names with the data's day.
public enum PageDataKind: String, Sendable, Hashable, CaseIterable {
    /// Fetched from the live source (in this run, or its cache from an earlier one).
    case live
    /// The bundled snapshot standing in for a live source that has not answered.
    case standIn = "stand-in"
    /// A bundled snapshot chosen by `--source snapshot`.
    case snapshot
    /// The bundled daily history.
    case history
    /// `ampel replay`'s walk through the history.
    case replay

    /// For a status that names no kind: what its source's name says (`snapshot:2020-10-15`,
    /// `bundled:…`, `history…`, `replay`); any other source is a live one.
    public init(source: String) {
        if source == "replay" {
            self = .replay
        } else if source.hasPrefix("history") {
            self = .history
        } else if source.hasPrefix("snapshot") || source.hasPrefix("bundled") {
            self = .snapshot
        } else {
            self = .live
        }
    }
}

/// The data the page's figures come from, in the words of `bridge/info`.
public struct PageDataStatus: Sendable, Hashable {
    /// `YYYY-MM-DD`, the publication day; `nil` before data is loaded.
    public var dataDate: String?
    /// `rki`, `snapshot:2020-10-15`, … (a stand-in's is the bundled snapshot's).
    public var source: String
    /// Older than allowed or the live source failing: the page must not show it as current.
    public var stale: Bool
    public var kind: PageDataKind
    /// Why the live source failed since its last success (set from a first failed attempt on,
    /// while its retries run); `nil` while it answers.
    public var lastError: String?
    /// Why a new publication is held back as a possibly wrong release, while it is.
    public var held: String?

    /// - Parameter kind: `nil` takes it from `source` (``PageDataKind/init(source:)``).
    public init(dataDate: String?, source: String, stale: Bool, kind: PageDataKind? = nil, lastError: String? = nil,
                held: String? = nil) {
        self.dataDate = dataDate
        self.source = source
        self.stale = stale
        self.kind = kind ?? PageDataKind(source: source)
        self.lastError = lastError
        self.held = held
    }
}

/// Everything `/` renders on the server; the rest (devices, lamps, bridge) the page's script
/// fetches from the JSON API.
public struct StatusPageModel: Sendable {
    public var language: Language
    public var ruleSet: RuleSet
    public var data: PageDataStatus
    /// Keyed by AGS; districts of the map missing here are drawn as having no data.
    public var districts: [String: DistrictStatus]
    /// Germany and the region's states with their indicators; empty under an incidence set.
    public var states: [StateReport]

    public init(language: Language, ruleSet: RuleSet, data: PageDataStatus, districts: [String: DistrictStatus], states: [StateReport] = []) {
        self.language = language
        self.ruleSet = ruleSet
        self.data = data
        self.districts = districts
        self.states = states
    }
}

/// `/districts/{ags}`: one district's rules in force and its bundled history.
public struct DistrictPageModel: Sendable {
    public var language: Language
    public var ruleSet: RuleSet
    public var data: PageDataStatus
    public var district: DistrictStatus
    /// The bundled daily incidences, oldest first; empty for a district the history lacks.
    public var history: [(day: Day, incidence: Double)]
    /// Germany and the district's state with their indicators, beside the district; empty under an incidence set.
    public var states: [StateReport] = []

    public init(language: Language, ruleSet: RuleSet, data: PageDataStatus, district: DistrictStatus, history: [(day: Day, incidence: Double)]) {
        self.language = language
        self.ruleSet = ruleSet
        self.data = data
        self.district = district
        self.history = history
    }
}
