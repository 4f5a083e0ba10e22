import AmpelTestSupport
import Foundation
import Testing

/// What a new user sees when the first run cannot reach its data or its broker: the reason,
/// within seconds, in `bridge/info`, `/readyz` and the log, and what stands in meanwhile.
@Suite("ampel run says plainly what is missing on its first run (built binary, real mosquitto)")
struct RunFirstRunStatusTests {
    @Test("an unreachable live source: its first failed attempt shows in bridge/info and /readyz within 10 s, with the reason and the bundled stand-in named")
    func unreachableSource() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // Nothing listens there: every attempt is refused at once, and retried.
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        let port = refusing.port
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.path, "--source", "rki",
                              "--url", "http://127.0.0.1:\(port)/COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.csv"]) { daemon in
            let base = try await daemon.httpURL()
            // From the moment it listens (a debug build beside CI's parallel suites takes seconds to
            // load the geometry before that; a user's clock starts with what they can ask).
            let started = ContinuousClock.now

            let ready = try await httpAwait(base + "/readyz", "the first failure in /readyz") { answer in
                guard let data = answer.json?["data"] as? [String: Any] else { return false }
                return data["lastError"] is String
            }
            let took = ContinuousClock.now - started
            #expect(took < .seconds(10), "the first failure showed after \(took)")
            let data = try #require(try ready.object()["data"] as? [String: Any])
            let error = try #require(data["lastError"] as? String)
            #expect(error.contains("127.0.0.1:\(port)") && error.lowercased().contains("refused"), "a reason to act on: \(error)")
            #expect(data["kind"] as? String == "stand-in", "\(data)")
            #expect(data["dataDate"] as? String == "2020-11-23", "the latest bundled snapshot stands in: \(data)")
            #expect(data["lastCheck"] is String, "\(data)")

            // bridge/info says the same, without waiting for the check's last retry.
            let info = try await Self.awaitRetainedInfo(broker) { $0["lastError"] is String }
            #expect(info["dataKind"] as? String == "stand-in", "\(info)")
            #expect((info["lastError"] as? String)?.lowercased().contains("refused") == true, "\(info)")
            #expect(info["lastFetch"] is String, "\(info)")

            // Once the check has given up: the log says what happened in words that fit it.
            try await daemon.awaitLog("could not reach rki")
            try await daemon.awaitLog("the bundled data of 2020-11-23 stands in until the source answers")
            #expect(!daemon.stderr.contains("rejected the answer"), "there was no answer: \(daemon.stderr)")
            #expect(!daemon.stderr.contains("last good data"), "nothing was fetched: \(daemon.stderr)")
            _ = try await daemon.stop()
        }
    }

    /// Reads the retained `bridge/info` until `done` holds for it (it is republished at each
    /// change; a subscription would see only the ones after it).
    static func awaitRetainedInfo(_ broker: MosquittoBroker, timeout: Duration = .seconds(30),
                                  until done: ([String: Any]) -> Bool) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let payload = try await RunHTTPTests.retained(broker, "ampel/bridge/info")
            let info = (try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any]) ?? [:]
            if done(info) { return info }
            guard ContinuousClock.now < deadline else { throw TestTimeout(description: "bridge/info never matched; last \(payload)") }
            await threadSleep(for: .milliseconds(100))
        }
    }

    @Test("the broker refuses: /readyz names the broker's error, not missing data")
    func brokerDown() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        let port = refusing.port
        try await withDaemon(["--broker", "mqtt://127.0.0.1:\(port)", "--state-dir", dir.path, "--source", "snapshot", "--date", "2020-10-15"]) { daemon in
            let base = try await daemon.httpURL()
            let answer = try await httpAwait(base + "/readyz", "the broker's error in /readyz") { answer in
                (answer.json?["reason"] as? String)?.contains("broker not connected:") == true
            }
            #expect(answer.status == 503)
            let body = try answer.object()
            let reason = try #require(body["reason"] as? String)
            #expect(reason.lowercased().contains("refused"), "\(reason)")
            #expect((body["data"] as? [String: Any])?["kind"] as? String == "snapshot", "\(body)")
            _ = try await daemon.stop()
        }
    }
}
