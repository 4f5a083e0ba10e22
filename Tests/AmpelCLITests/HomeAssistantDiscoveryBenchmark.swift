import AmpelTestSupport
import Foundation
import Testing

/// The two discovery forms with 1,000 devices: how many config messages (and bytes) the
/// daemon sends, and how long Home Assistant 2025.4.4 takes from its launch until its entity
/// registry holds every Ampel entity, loaded from the configs the broker retains. Two rounds,
/// the forms alternating (a shared, noisy machine); figures in docs/benchmarks.md.
///
/// On demand: `AMPEL_HA_BENCH=1 swift test --filter HomeAssistantDiscoveryBenchmark`
/// (Benchmarks/ha-discovery/run.sh).
@Suite("Home Assistant discovery with 1,000 devices, entity and device form (on demand: AMPEL_HA_BENCH=1)", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["AMPEL_HA_BENCH"] == "1", "AMPEL_HA_BENCH=1 runs it"))
struct HomeAssistantDiscoveryBenchmark {
    static let devices = 1_000

    @Test("config messages and Home Assistant's start, per form", .timeLimit(.minutes(30)))
    func bothForms() async throws {
        let release = try #require(HomeAssistantRunningTests.releases.first { $0.version == "2025.4.4" && $0.unavailable == nil },
                                   "Home Assistant 2025.4.4's venv (scripts/install-deps.sh)")
        let rounds = Int(ProcessInfo.processInfo.environment["AMPEL_HA_BENCH_ROUNDS"] ?? "") ?? 2
        var lines: [String] = []
        for round in 1...rounds {
            for form in ["entity", "device"] {
                let (messages, bytes, took) = try await Self.measure(form: form, release: release)
                lines.append("round \(round) \(form): \(messages) config messages, \(bytes) bytes; Home Assistant launch to \(3 + 96 * 3 + 2 * Self.devices) entities \(took)")
                print("HomeAssistantDiscoveryBenchmark: " + lines.last!)
            }
        }
        print("HomeAssistantDiscoveryBenchmark:\n" + lines.joined(separator: "\n"))
    }

    static func measure(form: String, release: HomeAssistantRunningTests.Release) async throws -> (Int, Int, Duration) {
        var options = Scene.Options()
        options.topics = ["homeassistant/#", "ampel/device/+/state"]
        return try await Scene.run(options) { scene in
            try await scene.start(configuration: "homeassistant:\n  discovery: \(form)\n")
            let keys = (0..<devices).map { "bench\($0)" }
            try await scene.round(keys: keys, at: HomeAssistantRunningTests.muenchen, tst: 100)
            try await scene.collector.awaitStates(keys, tst: 100)
            try await scene.stop()
            let configs = scene.collector.records().filter { $0.topic.hasPrefix("homeassistant/") && !$0.payload.isEmpty }
            let bytes = configs.reduce(0) { $0 + $1.topic.utf8.count + $1.payload.utf8.count }
            // Home Assistant starts against the broker that retains the configs.
            let began = ContinuousClock.now
            let home = try HomeAssistant(directory: scene.dir.appendingPathComponent("homeassistant"), broker: scene.broker, venv: release.venv)
            do {
                let api = try await home.onboard()
                let expected = 3 + 96 * 3 + 2 * devices
                try await poll("\(expected) Ampel entities in Home Assistant's registry", within: .seconds(900), every: .milliseconds(500)) {
                    let count = try await api.ampelEntities().count
                    return count >= expected ? .done(()) : .waiting("\(count)")
                }
                let took = ContinuousClock.now - began
                try await home.stop(api)
                return (configs.count, bytes, took)
            } catch {
                home.kill()
                throw error
            }
        }
    }
}
