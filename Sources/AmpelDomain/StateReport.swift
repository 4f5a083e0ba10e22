import AmpelCore

/// What a publication says about one federal state (or Germany, `00`): its indicators with
/// their recent course, and the phase the rule set gives the state's districts where it reads
/// state indicators. The object of `/api/states`, `ampel states --json` and the state topics
/// (docs/http.md, docs/topics.md).
public struct StateReport: Sendable, Hashable {
    /// `09`, or `00` for Germany.
    public let id: String
    /// `Bayern`, `Deutschland`.
    public let name: String
    /// The publication day.
    public let dataDate: Day
    public let indicators: [IndicatorValue]
    /// Each indicator's values over the last ``Trend/days`` days, oldest first; empty without history.
    public let series: [IndicatorKey: [Double?]]
    /// The phase the rule set gives the state's districts; `nil` for Germany, for a state
    /// outside the set's region and under an incidence set (its phase is the district's).
    public let phase: PhaseRules?
    /// Why, as in the signal (``RuleSet/reason(_:district:language:)``).
    public let reason: String?

    /// The report of state `id` in `dataset` under `ruleSet`, or `nil` where the publication
    /// has no state indicators for it.
    public init?(state id: String, dataset: Dataset, ruleSet: RuleSet, language: Language) {
        guard let values = dataset.states[id], let name = GermanState.name(ofState: id) else { return nil }
        self.id = id
        self.name = name
        dataDate = dataset.date
        indicators = values
        series = dataset.stateCourses[id] ?? [:]
        // Every district of a state shares the state's values: the first of the region stands for all.
        if ruleSet.readsStateIndicators, id != "00",
           let district = DistrictDirectory.germany.districts(in: ruleSet.region).first(where: { $0.stateCode == id }),
           let measurement = try? ruleSet.measure(DistrictIncidence(district: district, incidence: nil, stateIncidence: nil, indicators: values),
                                                  on: dataset.date) {
            phase = measurement.phase
            reason = ruleSet.reason(measurement, district: district, language: language)
        } else {
            phase = nil
            reason = nil
        }
    }

    /// Every state of `dataset` with indicators, Germany first.
    public static func all(_ dataset: Dataset, ruleSet: RuleSet, language: Language) -> [StateReport] {
        GermanState.ids.compactMap { StateReport(state: $0, dataset: dataset, ruleSet: ruleSet, language: language) }
    }

    /// `{"color","dataDate","id","indicators":[{"date","level","name","region","series","value"}],"name","phase","reason","ruleSet"}`.
    public func json(ruleSet: RuleSet) -> [UInt8] {
        var json = JSONWriter(capacity: 512 + 160 * indicators.count)
        json.raw(#"{"color":"#)
        json.string(phase?.color.hex)
        json.raw(#","dataDate":"#)
        json.string(dataDate.iso)
        json.raw(#","id":"#)
        json.string(id)
        json.raw(#","indicators":["#)
        for (index, value) in indicators.enumerated() {
            if index > 0 { json.raw(",") }
            value.write(to: &json, series: series[value.key] ?? [])
        }
        json.raw(#"],"name":"#)
        json.string(name)
        json.raw(#","phase":"#)
        json.string(phase?.id.id)
        json.raw(#","reason":"#)
        json.string(reason)
        json.raw(#","ruleSet":"#)
        json.string(ruleSet.id)
        json.raw("}")
        return json.bytes
    }
}
