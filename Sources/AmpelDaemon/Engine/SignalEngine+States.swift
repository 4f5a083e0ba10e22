import AmpelMessages
import AmpelDomain

extension SignalEngine {
    /// Germany (`00`) and the states the region's districts lie in: whose indicators are
    /// published, announced and shown beside the districts.
    var reportedStates: [String] {
        let states = Set(DistrictDirectory.germany.districts(in: settings.region).map { String($0.stateCode) })
        return GermanState.ids.filter { $0 == "00" || states.contains($0) }
    }

    /// The states' retained reports of a publication of state indicators: every one at the
    /// start, afterwards those that changed (a new day changes them all; a 304 none).
    mutating func stateReports(initial: Bool) -> [Action] {
        guard settings.publishDistricts, !dataset.states.isEmpty else { return [] }
        var actions: [Action] = []
        for id in reportedStates {
            guard let report = StateReport(state: id, dataset: dataset, ruleSet: settings.ruleSet, language: settings.defaultLanguage) else { continue }
            let payload = report.json(ruleSet: settings.ruleSet)
            guard initial || stateReports[id] != payload else { continue }
            stateReports[id] = payload
            actions.append(stateReportPublish(id, payload))
        }
        return actions
    }

    /// A state's report, retained on ``Topics/stateReport(_:)``.
    func stateReportPublish(_ id: String, _ payload: [UInt8]) -> Action {
        .publish(OutgoingMessage(topic: settings.topics.stateReport(id), payload: payload, qos: .atLeastOnce, retain: true), kind: .stateReport)
    }
}
