import AmpelCore
import AmpelDomain

extension SignalEngine {
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
