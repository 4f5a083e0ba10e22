import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` with its state directory on a small tmpfs that the test fills: the full disk is
/// said at once (`/readyz`, `bridge/info`, the page's data, `/metrics`) and for as long as it
/// lasts; once there is room again the journal is safe again without a restart, and a
/// `kill -9` afterwards loses nothing. Built binary, real mosquitto.
@Suite("ampel run on a state disk that fills up (built binary, real mosquitto, tmpfs)", .serialized,
       .enabled(if: TmpfsMount.unavailable == nil, Comment(rawValue: TmpfsMount.unavailable ?? "")))
struct RunDiskFullTests {
    static func readiness(_ base: String) async throws -> [String: Any] {
        let answer = try await httpGet(base + "/readyz")
        #expect(answer.status == 200, "\(answer.text)")
        return try answer.object()
    }

    @Test("the disk fills while 3,000 devices report: degraded within a second, said everywhere; room again: safe again, and a kill -9 after it loses nothing")
    func fillsDuringARun() async throws {
        var options = Scene.Options()
        options.topics = ["ampel/device/+/alert", "ampel/device/+/state", "ampel/bridge/state", "ampel/bridge/info"]
        try await Scene.run(options) { scene in
            let disk = try TmpfsMount(at: scene.state.path, megabytes: 24)
            defer { disk.unmount() }
            let daemon = try await scene.start()
            let base = try await daemon.httpURL()
            _ = try await httpAwait(base + "/readyz", "ready") { $0.status == 200 }
            // The journal's open segment has its 4 MiB reserved: 3,000 first sightings (an alert
            // of about 1.5 kB each) need the next one, which the full disk cannot give.
            disk.fill()
            let keys = (0..<3_000).map { "disk\($0)" }
            let mark = scene.collector.mark
            try await scene.round(keys: keys, at: RunCrashTests.muenchen, tst: 100)
            try await daemon.awaitLog("the journal cannot be written")
            let failed = ContinuousClock.now
            let degraded = try await Self.readiness(base)
            #expect(ContinuousClock.now - failed < .seconds(1))
            #expect(degraded["status"] as? String == "degraded", "\(degraded)")
            #expect((degraded["reason"] as? String)?.contains("the journal cannot be written") == true, "\(degraded)")
            #expect((degraded["reason"] as? String)?.contains("No space left on device") == true, "\(degraded)")
            #expect(try await httpGet(base + "/metrics").text.contains("ampel_journal_writable 0"))
            try await RunClusterTests.awaitInfo(scene.collector, "bridge/info with the journal's error", since: mark) { info in
                (info["journalError"] as? String)?.contains("the journal cannot be written") == true
                    && info["lastError"] as? String == info["journalError"] as? String
            }
            let page = try await httpGet(base + "/api/bridge").object()
            #expect(((page["info"] as? [String: Any])?["journalError"] as? String)?.contains("No space left") == true, "\(page)")
            // Every device is handled all the same; the disk stays full for a while.
            try await scene.collector.awaitStates(keys, tst: 100)
            #expect(try await Self.readiness(base)["status"] as? String == "degraded")

            let room = scene.collector.mark
            disk.empty()
            try await daemon.awaitLog("the journal is safe again", timeout: .seconds(30))
            #expect(try await Self.readiness(base)["status"] as? String == "ready")
            #expect(try await httpGet(base + "/metrics").text.contains("ampel_journal_writable 1"))
            try await RunClusterTests.awaitInfo(scene.collector, "bridge/info without the journal's error", since: room) { info in
                info["journalError"] is NSNull && info["lastError"] is NSNull
            }
            let safe = try #require(daemon.stderr.split(separator: "\n").first { $0.contains("the journal is safe again") })
            #expect(safe.contains("unwritten="), "it says what it could not write: \(safe)")

            // What the broker acknowledged from now on survives a crash: no alert again after it.
            try await scene.round(keys: keys, at: RunCrashTests.altoetting, tst: 200)
            try await scene.collector.awaitStates(keys, tst: 200)
            try await scene.kill()
            try await scene.start()
            try await scene.round(keys: keys, at: RunCrashTests.altoetting, tst: 300)
            try await scene.collector.awaitStates(keys, tst: 300)
            try await scene.stop()
            let alerts = scene.collector.alerts()
            let wrong = keys.filter { alerts[$0] != ["null>red", "red>green"] }
            #expect(wrong.isEmpty, "\(wrong.count) devices with other alerts, e.g. \(wrong.prefix(3).map { "\($0): \(alerts[$0] ?? [])" })")
        }
    }

    @Test("too little room at start: exit 73 naming the directory, the room it needs and the room free; no error lines before it")
    func noRoomAtStart() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let state = dir.appendingPathComponent("state").path
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let disk = try TmpfsMount(at: state, megabytes: 2)
        defer { disk.unmount() }
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        try await withDaemon(["--broker", broker.url, "--state-dir", state, "--source", "snapshot", "--date", "2020-10-15"]) { daemon in
            let status = try await daemon.exit()
            #expect(status.exitCode == 73, "\(status)\n\(daemon.stderr)")
            let stderr = daemon.stderr
            let error = try #require(stderr.split(separator: "\n").last { $0.hasPrefix("Error: ") }, "\(stderr)")
            #expect(error.contains(state) && error.contains("needs 4.0 MiB") && error.contains("MiB free"), "\(error)")
            let others = stderr.split(separator: "\n").filter { !$0.hasPrefix("Error: ") && ($0.contains(" error ") || $0.contains(" critical ")) }
            #expect(others.isEmpty, "error lines besides the reason: \(others)")
        }
    }
}
