import AmpelCore
import AmpelDomain
import AmpelMessages

extension SignalEngine {
    // MARK: Discovery

    /// The bridge's and the districts' discovery configs; the devices' go out with the device walk.
    func districtDiscovery() -> [Action] {
        guard let discovery = settings.discovery, settings.publishDistricts else { return [] }
        let configs = discovery.bridge() + dataset.districts(in: settings.region).flatMap {
            discovery.district(ags: $0.district.ags, name: $0.district.name)
        } + reportedStates.compactMap {
            StateReport(state: $0, dataset: dataset, ruleSet: settings.ruleSet, language: settings.defaultLanguage)
        }.flatMap { discovery.state($0, ruleSet: settings.ruleSet) }
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
    /// `afterConfigs`: after a switch of `homeassistant.discovery`, the removals of the old
    /// form's bridge, district and state configs, due once this run's configs have taken their
    /// entities over.
    mutating func retireDiscovery() -> (now: [Action], afterConfigs: [Action]) {
        let announced = settings.announcedDiscovery
        let current = settings.discovery?.scope
        let districts = dataset.districts(in: settings.region).map(\.district.ags)
        var removals: [Action] = []
        var afterConfigs: [Action] = []
        for old in announced where old != current {
            let left = old.leftBehind(by: current)
            let names = DiscoveryTopics(prefix: old.prefix, node: old.node, form: old.form)
            var gone: [DiscoveryTopics.Entity] = []
            if left.districts { gone += DiscoveryTopics.bridgeAndDistricts(districts) }
            if left.states { gone += DiscoveryTopics.states }
            if left.migrate {
                // Marked now, emptied after this run's configs (``Event/start``).
                removals += names.migrations(gone).map { .publish($0, kind: .discovery) }
                afterConfigs += names.removals(gone).map { .publish($0, kind: .discovery) }
            } else {
                removals += names.removals(gone).map { .publish($0, kind: .discovery) }
            }
            if left.devices, !retiringDevices.contains(where: { $0.names == names }) { retiringDevices.append((names, left.migrate)) }
        }
        guard !removals.isEmpty || !retiringDevices.isEmpty else {
            return (announced == currentDiscovery ? [] : [.recordDiscovery(currentDiscovery, whenTaken: false)], afterConfigs)
        }
        var both = announced
        if let current, !both.contains(current) { both.append(current) }
        var actions: [Action] = both == announced ? [] : [.recordDiscovery(both, whenTaken: false)]
        actions += removals
        if retiringDevices.isEmpty { actions.append(.recordDiscovery(currentDiscovery, whenTaken: true)) }
        return (actions, afterConfigs)
    }

    /// This run's ``PublishedShape``.
    var currentShape: PublishedShape {
        PublishedShape(base: settings.topics.base, ruleSet: settings.ruleSet.id, textsInState: settings.outputs.textsInState,
                       defaultLanguage: settings.defaultLanguage,
                       deviceLanguages: settings.devices.compactMapValues(\.lang), texts: textsTopics.values.flatMap(\.values),
                       states: dataset.states.isEmpty || !settings.publishDistricts ? [] : reportedStates.map(settings.topics.stateReport))
    }

    /// At start: empty retained payloads for the texts topics the last run retained and this one
    /// does not, and, when the states' shape differs, every device's state again in the start's
    /// walk (recorded when a walk completes; at once without devices). Partitioned instances
    /// share the texts topics under their one base topic: only the one with the district topics
    /// (``Settings/publishDistricts``) empties them, so that another's states keep theirs.
    mutating func retireShape() -> [Action] {
        let current = currentShape
        guard let before = settings.publishedShape, before != current else { return [] }
        /// An empty retained payload for each topic of `old` not in `kept`.
        func emptied(_ old: [String], kept: [String], _ kind: PublishKind) -> [Action] {
            let kept = Set(kept)
            return old.filter { !kept.contains($0) }.map { .publish(OutgoingMessage(topic: $0, text: "", qos: .atLeastOnce, retain: true), kind: kind) }
        }
        var actions: [Action] = settings.publishDistricts
            ? emptied(before.texts, kept: current.texts, .texts) + emptied(before.states, kept: current.states, .stateReport) : []
        if before.fingerprint != current.fingerprint, devices.count > 0 {
            shapePending = current
        } else {
            actions.append(.recordShape(current))
        }
        return actions
    }
}
