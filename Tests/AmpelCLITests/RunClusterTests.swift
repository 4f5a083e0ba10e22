import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` with a list of brokers: failover between nodes, a clustered broker (nats-server),
/// and partitioned instances on it. Built binary, real brokers.
@Suite("ampel run on a list of brokers and on a nats-server cluster (built binary)", .timeLimit(.minutes(3)))
struct RunClusterTests {
    typealias Collector = RunCrashTests.Collector

    /// The `bridge/info` last seen under `topic` by `collector`, parsed.
    static func info(_ collector: Collector, topic: String = "ampel/bridge/info") -> [String: Any]? {
        guard let last = collector.records().last(where: { $0.topic == topic }) else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(last.payload.utf8)) as? [String: Any]
    }

    /// Until `collector` saw a `bridge/info` for which `test` holds.
    static func awaitInfo(_ collector: Collector, topic: String = "ampel/bridge/info", _ what: String, timeout: Duration = .seconds(30),
                          _ test: @escaping @Sendable ([String: Any]) -> Bool) async throws {
        try await collector.wait(what, timeout: timeout) { records in
            records.contains { record in
                guard record.topic == topic,
                      let info = try? JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any] else { return false }
                return test(info)
            }
        }
    }

    static func failovers(_ info: [String: Any]) -> Int? { (info["counters"] as? [String: Any])?["failovers"] as? Int }

    @Test("mosquitto: the first address is dead, the daemon takes the second; that one is killed, it fails over to the third and counts it")
    func brokerListOnMosquitto() async throws {
        let second = try await MosquittoBroker.start()
        defer { second.stop() }
        let third = try await MosquittoBroker.start()
        defer { third.stop() }
        let dead = try MosquittoBroker.freeLoopbackPort()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let onSecond = try Collector(second, topics: ["ampel/bridge/info"])
        defer { onSecond.stop() }
        let onThird = try Collector(third, topics: ["ampel/device/#", "ampel/bridge/state", "ampel/bridge/info"])
        defer { onThird.stop() }
        let daemon = try RunRecoveryTests.Daemon([
            "--broker", "mqtt://127.0.0.1:\(dead),\(second.url),\(third.url)", "--state-dir", dir.path,
            "--source", "snapshot", "--date", "2020-10-15", "--log-level", "info",
        ])
        let secondName = "127.0.0.1:\(second.port)", thirdName = "127.0.0.1:\(third.port)"
        do {
            try await Self.awaitInfo(onSecond, "bridge/info on the second broker naming it") { $0["broker"] as? String == secondName }
        } catch {
            Issue.record("\(error)\n\(daemon.stderr)")
            return
        }
        #expect(Self.info(onSecond).flatMap(Self.failovers) == 0)
        #expect(daemon.stderr.contains("trying the next"), "the dead first address is logged")

        await second.kill()
        try await Self.awaitInfo(onThird, "bridge/info on the third broker naming it, one failover") {
            $0["broker"] as? String == thirdName && Self.failovers($0) == 1
        }
        // It works there: subscribed again (the third broker has no session), a fix gets its state.
        try await RunCrashTests.send(third, [("alice", RunCrashTests.muenchen)], tst: 100)
        try await onThird.awaitStates(["alice"], tst: 100)
        let status = try await daemon.stop()
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        #expect(daemon.stderr.contains("failed over"), "\(daemon.stderr)")
    }
}
