import AmpelCore
import AmpelData
import AmpelDomain
import AmpelMQTT
import AmpelMessages
import Foundation
import Logging
import Synchronization
import ServiceLifecycle

/// What the daemon tells about itself: `bridge/info`, the HTTP hand-over (``StatusView``), and
/// the records of what it announced to Home Assistant and the shape it retains.
extension AmpelDaemon {
    /// The counters with the ones other parts keep (the intake gate, the webhooks).
    func liveCounters(_ run: Running) -> Counters {
        var counters = report.counters
        let tally = run.executor.tally
        counters.published = tally.published
        counters.republished = tally.republished
        counters.alerts = tally.alerts
        counters.owntracksTransitions = tally.owntracksTransitions
        counters.publishFailures = tally.publishFailures + run.executor.delayed.failures
        counters.refused = status.refusals.counts
        counters.forgotten = tally.forgotten
        counters.intakePaused = gate.pauses
        if gate.shed > 0 { counters.dropped["intake-full", default: 0] = gate.shed }
        counters.data = feedState?.status?.counters ?? DataCounters()
        counters.webhooks = webhooks.stats
        return counters
    }

    /// `bridge/info`'s payload; `counters`: ``liveCounters(_:)`` when the caller has them already.
    func infoPayload(_ run: Running, counters live: Counters? = nil) -> [UInt8] {
        guard let feedState else { return [] }
        var counters = live ?? liveCounters(run)
        counters.failovers = transport.failovers
        let info = BridgeInfo(broker: transport.brokerInUse,
            version: Self.version, ruleSet: ruleSet.id, source: feedState.dataset.source, dataDate: feedState.dataset.date.iso,
            dataKind: feedState.kind.rawValue, lastFetch: feedState.lastFetch.map { InternetTime.format(secondsSince1970: $0.timeIntervalSince1970) }, lastError: feedState.lastError,
            lastCheck: feedState.status?.lastCheck.map { InternetTime.format(secondsSince1970: $0.timeIntervalSince1970) },
            held: feedState.status?.held,
            stale: feedState.stale, devices: run.engine.devices.count, counters: counters, stateRecovered: stateRecovery,
            journalError: run.journal.failure)
        return info.json()
    }

    /// Hands the status over to the HTTP readers (``StatusView``): values only, so this copies
    /// nothing; the device table only when a reader asked for it and it changed.
    /// The hand-over before the start: the data in force and readiness, no rule set yet.
    func publishReadiness() {
        guard configuration.http.listen != nil else { return }
        status.publish(readinessSnapshot())
    }

    /// A snapshot with what `/readyz` reads: readiness, the data in force, the time.
    func readinessSnapshot() -> StatusView.Snapshot {
        var snapshot = StatusView.Snapshot()
        snapshot.readiness = StatusView.Readiness(dataLoaded: feedState != nil, connected: false, subscribed: subscribed)
        snapshot.feed = feedState
        snapshot.at = Int(now().timeIntervalSince1970)
        return snapshot
    }

    /// - Parameters:
    ///   - info: the `bridge/info` payload when this tick built it already;
    ///   - counters: ``liveCounters(_:)`` when this tick took them already.
    func publishStatus(_ run: Running, info: [UInt8]? = nil, counters live: Counters? = nil) {
        // Without the HTTP server (`http.listen: false`) nobody reads it.
        guard configuration.http.listen != nil else { return }
        var snapshot = readinessSnapshot()
        snapshot.ruleSet = ruleSet
        let engine = run.engine
        snapshot.dataset = engine.dataset
        snapshot.stale = engine.stale
        snapshot.districts = engine.districtSignals.map { StatusView.District(ags: $0.key, signal: $0.value) }.sorted { $0.ags < $1.ags }
        let wanted = status.takeDevicesWanted()
        let tally = run.executor.tally
        let generations = report.nextStatus(deviceChanges: tally.deviceChanges, wanted: wanted)
        snapshot.generation = generations.generation
        snapshot.devicesGeneration = generations.devicesGeneration
        snapshot.devices = generations.devicesGeneration == generations.generation ? engine.devices : status.handedDevices()
        snapshot.deviceCount = engine.devices.count
        let looks = engine.lampLooksSent
        let online = engine.lampAvailability
        snapshot.lamps = configuration.lamps.map {
            StatusView.Lamp(settings: $0, online: online[$0.name], color: looks[$0.name]?.color.hex, blink: looks[$0.name]?.blink ?? false)
        }
        let counters = live ?? liveCounters(run)
        snapshot.bridgeInfo = info ?? infoPayload(run, counters: counters)
        snapshot.counters = counters
        snapshot.messagesReceived = report.messagesReceived
        snapshot.publishedByKind = Dictionary(uniqueKeysWithValues: tally.byKind.map { ("\($0.key)", $0.value) })
        snapshot.errors = report.recentErrors
        status.publish(snapshot)
    }

    /// `bridge/info`, handed over without waiting for the broker (like every publish of the
    /// loop); returns its payload, for the status of the same tick.
    /// - Parameter counters: ``liveCounters(_:)`` when the caller took them already.
    @discardableResult
    func publishInfo(_ run: Running, counters: Counters? = nil) -> [UInt8]? {
        guard feedState != nil else { return nil }
        report.infoDirty = false
        report.webhookStats = webhooks.stats
        let payload = infoPayload(run, counters: counters)
        do {
            try transport.enqueue(OutgoingMessage(topic: topics.bridgeInfo, payload: payload, qos: .atLeastOnce, retain: true), acknowledged: nil)
        } catch {
            logger.debug("bridge info not published", metadata: ["error": "\(error)"])
        }
        return payload
    }

    /// Writes what may be announced to Home Assistant: at once, or (`whenTaken`) once the
    /// broker has acknowledged a publish made now, and so taken the removals before it (one
    /// connection, in order): a crash before then leaves the old record, and the next start
    /// removes again.
    func recordDiscovery(_ scopes: [DiscoveryScope], whenTaken: Bool) {
        let file = discoveryScopes
        let logger = self.logger
        let described = scopes.map { "\($0.prefix)/\($0.node)\($0.devices ? " with devices" : "")" }.joined(separator: ", ")
        @Sendable func write() {
            do {
                try file.save(scopes)
                logger.info(whenTaken ? "the broker took the removed Home Assistant configs; recorded what is announced" : "recorded what may be announced to Home Assistant",
                            metadata: ["scopes": "\(described)"])
            } catch {
                logger.warning("cannot record what is announced to Home Assistant; the next start may remove or keep too much", metadata: ["error": "\(error)"])
            }
        }
        guard whenTaken else { return write() }
        onceBrokerTook(write, otherwise: "the removals of Home Assistant configs were not acknowledged; the next start sends them again")
    }

    /// Runs `body` once the broker has acknowledged a publish made now, and so taken every
    /// publish handed over before it (one connection, in order); logs `otherwise` if it does not.
    func onceBrokerTook(_ body: @escaping @Sendable () -> Void, otherwise: String) {
        let logger = self.logger
        probes.start { error in
            guard let error else { return body() }
            logger.notice(Logger.Message(stringLiteral: otherwise), metadata: ["error": "\(error)"])
        }
    }

    /// Writes the shape of the retained states once the broker has acknowledged a publish made
    /// now, and so taken the states and emptied texts topics before it: a crash before then
    /// leaves the old record, and the next start republishes again.
    func recordShape(_ shape: PublishedShape) {
        let file = publishedShapes
        let logger = self.logger
        onceBrokerTook({
            do {
                try file.save(shape)
                logger.info("recorded the shape of the published device states")
            } catch {
                logger.warning("cannot record the shape of the published device states; the next start republishes them", metadata: ["error": "\(error)"])
            }
        }, otherwise: "the republished device states were not acknowledged; the next start sends them again")
    }
}
