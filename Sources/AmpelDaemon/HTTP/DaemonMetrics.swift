import AmpelData
import AmpelCore
import AmpelDomain
import Foundation
import Metrics
import Prometheus
import Synchronization

/// `/metrics`: the daemon's numbers in the Prometheus text format, through swift-metrics on a
/// swift-prometheus registry of its own (no global bootstrap, so a test can hold several).
///
/// The counts are the loop's own (``Counters``, the numbers of `bridge/info`): at each scrape the
/// swift-metrics counters are advanced by what the loop counted since the last one, so the hot
/// path counts once, as before, and `/metrics` never disagrees with `bridge/info`. The two
/// latency histograms are recorded by the loop as it goes (a clock read and a locked bucket
/// increment per message; docs/benchmarks.md has the cost).
final class DaemonMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    /// The district lookup of one fix in the geometry index.
    let lookup: Metrics.Timer
    /// The handling of one broker message by the loop, from the engine's event to the last publish handed over.
    let handling: Metrics.Timer
    /// What each counter showed at the last scrape, by name and labels.
    private let seen = Mutex<[String: Int]>([:])

    static let latencyBuckets: [Duration] = [
        .microseconds(1), .microseconds(2), .microseconds(5), .microseconds(10), .microseconds(25), .microseconds(50),
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(5), .milliseconds(25),
        .milliseconds(100), .seconds(1),
    ]

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["ampel_lookup_duration_seconds"] = Self.latencyBuckets
        factory.durationHistogramBuckets["ampel_message_handling_duration_seconds"] = Self.latencyBuckets
        self.factory = factory
        lookup = Metrics.Timer(label: "ampel_lookup_duration_seconds", factory: factory)
        handling = Metrics.Timer(label: "ampel_message_handling_duration_seconds", factory: factory)
    }

    /// Records one district lookup (the loop, per fix).
    func recordLookup(_ duration: Duration) { lookup.recordNanoseconds(Self.nanoseconds(duration)) }
    /// Records the handling of one broker message (the loop).
    func recordHandling(_ duration: Duration) { handling.recordNanoseconds(Self.nanoseconds(duration)) }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let parts = duration.components
        return parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000
    }

    /// The exposition of everything `snapshot` holds, with the connection state read now.
    func exposition(_ snapshot: StatusView.Snapshot, now: Date = Date()) -> [UInt8] {
        let counters = snapshot.counters
        seen.withLock { seen in
            func count(_ name: String, _ labels: [(String, String)] = [], _ value: Int) {
                let id = name + labels.map { "|\($0.0)=\($0.1)" }.joined()
                let delta = value - (seen[id] ?? 0)
                seen[id] = value
                let counter = Counter(label: name, dimensions: labels, factory: factory)
                if delta > 0 { counter.increment(by: delta) }
            }
            count("ampel_messages_received_total", [], snapshot.messagesReceived)
            for (kind, value) in counters.accepted { count("ampel_messages_accepted_total", [("input", kind)], value) }
            for (type, value) in counters.skipped { count("ampel_messages_skipped_total", [("type", type)], value) }
            for (reason, value) in counters.dropped { count("ampel_messages_dropped_total", [("reason", reason)], value) }
            for (kind, value) in snapshot.publishedByKind { count("ampel_messages_published_total", [("kind", kind)], value) }
            count("ampel_publish_failures_total", [], counters.publishFailures)
            for (reason, classes) in counters.refused {
                for (topicClass, value) in classes { count("ampel_publish_refused_total", [("reason", reason), ("class", topicClass)], value) }
            }
            count("ampel_alerts_total", [], counters.alerts)
            for (reason, value) in counters.alertsSuppressed { count("ampel_alerts_suppressed_total", [("reason", reason)], value) }
            count("ampel_data_refreshes_applied_total", [], counters.datasetsApplied)
            count("ampel_data_refresh_failures_total", [], counters.datasetsRejected)
            count("ampel_data_checks_total", [], counters.data.checks)
            count("ampel_data_not_modified_total", [], counters.data.notModified)
            count("ampel_data_revisions_ignored_total", [], counters.data.revisions)
            count("ampel_data_corrections_total", [], counters.data.corrections)
            count("ampel_data_held_total", [], counters.data.held)
            count("ampel_data_skipped_rows_total", [], counters.data.skippedRows)
            for (reason, value) in counters.data.rejections { count("ampel_data_rejections_total", [("reason", reason.rawValue)], value) }
            count("ampel_mqtt_reconnects_total", [], counters.reconnects)
            count("ampel_devices_forgotten_total", [], counters.forgotten)
        }
        func gauge(_ name: String, _ labels: [(String, String)] = [], _ value: Double) {
            Gauge(label: name, dimensions: labels, factory: factory).record(value)
        }
        gauge("ampel_devices", [], Double(snapshot.deviceCount))
        gauge("ampel_journal_writable", [], snapshot.readiness.journal == nil ? 1 : 0)
        var phases: [String: Int] = [:]
        for phase in PhaseID.allCases { phases["\(phase.name)"] = 0 }
        for district in snapshot.districts { phases[district.signal.phase, default: 0] += 1 }
        for (phase, value) in phases { gauge("ampel_districts", [("phase", phase)], Double(value)) }
        // Per district, for a dashboard to plot: the incidence, and the phase as its rank in
        // the rule set (0 the lowest phase: green under `bavaria`), a number a graph can draw.
        let ranks = Dictionary((snapshot.ruleSet?.phases ?? []).enumerated().map { ($1.id.id, $0) }, uniquingKeysWith: { first, _ in first })
        for district in snapshot.districts {
            let name = district.signal.district?.name ?? district.ags
            if let incidence = district.signal.incidence {
                gauge("ampel_district_incidence", [("ags", district.ags), ("name", name)], incidence)
            }
            if let rank = ranks[district.signal.phase] {
                gauge("ampel_district_phase_rank", [("ags", district.ags), ("name", name)], Double(rank))
            }
        }
        // Per state (`00`: Germany) and indicator, as published: hospital admissions, patients in intensive care.
        for (state, values) in snapshot.dataset?.states ?? [:] {
            let name = GermanState.name(ofState: state) ?? state
            for value in values {
                guard let number = value.value else { continue }
                gauge("ampel_state_indicator", [("state", state), ("name", name), ("indicator", value.key.name.rawValue)], number)
            }
        }
        if let dataset = snapshot.dataset {
            gauge("ampel_data_age_seconds", [], max(0, now.timeIntervalSince1970 - Double(dataset.date.daysSinceEpoch * 86_400)))
        }
        gauge("ampel_data_stale", [], snapshot.stale ? 1 : 0)
        gauge("ampel_mqtt_connected", [], snapshot.readiness.connected ? 1 : 0)
        gauge("ampel_ready", [], snapshot.readiness.problem == nil ? 1 : 0)
        if let rss = ProcessMemory.residentBytes() { gauge("ampel_process_resident_memory_bytes", [], Double(rss)) }
        return registry.emitToBuffer()
    }
}
