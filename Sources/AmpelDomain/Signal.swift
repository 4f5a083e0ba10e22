import AmpelCore

/// What Ampel tells a lamp, a display or a person about one place: the signal contract.
///
/// Its JSON form (see `docs/signal.md`), written by ``json(device:)``, is the output of
/// `ampel check --json` and the payload of the daemon's `…/state` topics.
public struct Signal: Sendable, Hashable {
    public struct DistrictRef: Sendable, Hashable, Codable {
        public let ags: String
        public let name: String
        public let state: String
        public let type: String?

        public init(ags: String, name: String, state: String, type: String?) {
            self.ags = ags
            self.name = name
            self.state = state
            self.type = type
        }
    }

    /// The district, or `nil` for a position in no German district.
    public var district: DistrictRef?
    /// The 7-day incidence per 100,000, or `nil` outside the region.
    public var incidence: Double?
    /// `green`, `yellow`, `red`, `darkred`, or `outside`.
    public var phase: String
    /// `#RRGGBB`.
    public var color: String
    /// The publication day of the data (`YYYY-MM-DD`).
    public var dataDate: String
    /// The id of the rule set that classified.
    public var ruleSet: String
    /// `de` or `en`.
    public var lang: String
    public var title: String
    public var rules: [String]
    public var always: [String]
    /// True when the data is older than allowed or the source has failed since its last success.
    public var stale: Bool
    /// The phase the day's value alone gives; `nil` for `outside`. Equals ``phase`` unless
    /// the rule set counts days (``DayCounts``).
    public var measuredPhase: String?
    /// The first day of ``phase`` (`YYYY-MM-DD`) as far as the history reaches; `nil` without history or `outside`.
    public var since: String?
    /// `nil` without enough history, and for `outside`.
    public var trend: Trend?
    /// Each indicator the rule set reads, with its value and whether it set the phase; empty
    /// for `outside`.
    public var indicators: [IndicatorReading] = []
    /// False when an indicator the set reads has no value for the day.
    public var complete: Bool = true
    /// Why the phase is what it is, in the signal's language ("Red: 653 COVID-19 patients in
    /// intensive care in Bayern, above 600"); `nil` for `outside`.
    public var reason: String?

    /// The one line a notification shows: the phase's title, or under a set of state
    /// indicators the reason, which says which value set the phase ("Red: 653 COVID-19
    /// patients in intensive care in Bayern, above 600").
    public var headline: String {
        indicators.contains { $0.level == .state } ? reason ?? title : title
    }

    /// The phase id, `nil` for `outside`.
    public var phaseID: PhaseID? { PhaseID(phase) }
}

/// Why no signal can be given.
public struct SignalError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension RuleSet {
    /// The signal for a district whose incidence is known.
    ///
    /// - Parameter course: the district's trend and phase in force from the history
    ///   (``Dataset/courses``); without it the measured phase is in force and `since` and
    ///   `trend` are `null`.
    /// - Throws: ``SignalError`` when the data gives no phase (``measure(_:on:)``).
    public func signal(for entry: DistrictIncidence, dataDate: Day, language: Language, stale: Bool = false,
                       course: DistrictCourse? = nil) throws(SignalError) -> Signal {
        let measurement = try measure(entry, on: dataDate)
        let measured = measurement.phase
        // The course was computed under this rule set, so its phase is one of ours.
        let inForce = course?.inForce.flatMap { state in rules(for: state.phase).map { (state: state, rules: $0) } }
        let phase = inForce?.rules ?? measured
        let district = entry.district
        return Signal(
            district: .init(ags: district.ags, name: district.name, state: district.state, type: district.kind.rawValue),
            incidence: entry.incidence,
            phase: phase.id.id,
            color: phase.color.hex,
            dataDate: dataDate.iso,
            ruleSet: id,
            lang: language.rawValue,
            title: phase.title(language),
            rules: phase.rules(language),
            always: always(language),
            stale: stale,
            measuredPhase: measured.id.id,
            since: inForce?.state.since.iso,
            trend: course?.trend,
            indicators: measurement.readings,
            complete: measurement.complete,
            reason: reason(measurement, district: district, language: language)
        )
    }

    /// The signal for a place outside the monitored region; `district` is `nil` outside Germany.
    public func outsideSignal(district: Signal.DistrictRef?, dataDate: Day, language: Language, stale: Bool = false) -> Signal {
        Signal(
            district: district,
            incidence: nil,
            phase: OutsideMarker.id,
            color: outside.color.hex,
            dataDate: dataDate.iso,
            ruleSet: id,
            lang: language.rawValue,
            title: outside.title(language),
            rules: outside.rules(language),
            always: always(language),
            stale: stale,
            measuredPhase: nil,
            since: nil,
            trend: nil
        )
    }
}
