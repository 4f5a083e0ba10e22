import AmpelCore
import AmpelDomain

extension Dataset {
    /// The districts of `region` whose phase under `ruleSet` differs from that in `previous`,
    /// including districts present in only one of the two.
    ///
    /// This is what a new publication means for the signals: only devices in these districts
    /// need a new one. Without a previous dataset every district of `region` is new.
    public func districtsWithChangedPhase(since previous: Dataset?, ruleSet: RuleSet, region: Region = .bavaria) -> Set<String> {
        func phases(_ dataset: Dataset?) -> [String: PhaseID?] {
            var result: [String: PhaseID?] = [:]
            guard let dataset else { return result }
            for (ags, entry) in dataset.districts where region.contains(ags: ags) {
                // The phase in force where the history gave one. Validated data has no invalid
                // incidence; `nil` would still compare unequal to any phase.
                result[ags] = dataset.courses[ags]?.inForce?.phase ?? (try? ruleSet.measure(entry, on: dataset.date).phase.id)
            }
            return result
        }
        let old = phases(previous)
        let new = phases(self)
        var changed: Set<String> = []
        for ags in Set(old.keys).union(new.keys) {
            guard let before = old[ags], let after = new[ags], before == after else {
                changed.insert(ags)
                continue
            }
        }
        return changed
    }
}
