import AmpelTestSupport
import Foundation
import Synchronization
import Testing

/// `ampel run` against a real mosquitto, started over a state directory that holds a bad state
/// file or a bad data cache: the daemon must come online anyway, with the bad file moved aside
/// (content intact) and the fact reported in `bridge/info`.
@Suite("ampel run recovers from a bad state file or cache (built binary, real mosquitto)")
struct RunRecoveryTests {
    /// A running `ampel run`: its standard error collected, its end awaitable.
    final class Daemon: Sendable {
        let process: ChildProcess
        private let configurationFile: URL
        private let collected = Watched("")
        private let exits: AsyncStream<ChildProcess.Status>
        private let ended = Watched<ContinuousClock.Instant?>(nil)


        /// The configuration file unless a test gives its own: the tests' fixes carry fixed
        /// timestamps (`tst` 100, 1000, 1700000000), far behind the clock, which the default
        /// `alerts.max_fix_age` would take for a phone's queue delivered late.
        static let replayConfiguration = "alerts:\n  max_fix_age: false\n"

        /// - Parameters:
        ///   - environment: added to the daemon's environment (through `env`).
        ///   - configuration: the YAML of the daemon's `--config` file.
        ///   - command: `run`, or `replay` for the daemon on the bundled history.
        init(_ arguments: [String], environment: [String: String] = [:], configuration: String = Daemon.replayConfiguration,
             command: String = "run") throws {
            let (exits, continuation) = AsyncStream.makeStream(of: ChildProcess.Status.self)
            self.exits = exits
            let collected = self.collected
            let ended = self.ended
            let binary = try AmpelBinary.url().path
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-run-\(UUID().uuidString).yaml")
            try configuration.write(to: file, atomically: true, encoding: .utf8)
            configurationFile = file
            let arguments = ["--config", file.path] + arguments
            let settings = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            process = try ChildProcess(
                environment.isEmpty ? binary : "/usr/bin/env",
                (environment.isEmpty ? [] : settings + [binary]) + [command] + arguments, output: .discard,
                errors: .read { data in collected.update { $0 += String(decoding: data, as: UTF8.self) } },
                onExit: { status in
                    ended.update { $0 = .now }
                    continuation.yield(status)
                    continuation.finish()
                })
        }

        /// A test that ends half-way (a failed expectation, a timeout) takes its daemon with it:
        /// none keeps running against a broker that is gone.
        deinit {
            process.signal(SIGKILL)
            try? FileManager.default.removeItem(at: configurationFile)
        }

        var stderr: String { collected.value }
        /// When the process was reaped, read on the reaping thread: a busy test process may
        /// resume the task that awaits ``exit()`` much later.
        var exitedAt: ContinuousClock.Instant? { ended.value }

        /// Until the daemon's standard error contains `text`.
        func awaitLog(_ text: String, timeout: Duration = .seconds(60)) async throws {
            let collected = self.collected
            try await withTimeout(timeout, "'\(text)' in the daemon's log") {
                await collected.wait { $0.contains(text) }
            }
        }

        /// SIGTERM, then how it ended.
        func stop() async throws -> ChildProcess.Status {
            process.signal(SIGTERM)
            return try await exit()
        }

        /// How it ended, once it has.
        func exit() async throws -> ChildProcess.Status {
            let exits = self.exits
            return try await withTimeout(.seconds(30), "ampel run to end") {
                for await status in exits { return status }
                throw TestTimeout(description: "no exit status")
            }
        }
    }

    /// The retained `bridge/state` and then `bridge/info`, each awaited with `mosquitto_sub`
    /// (it exits when the message arrived; -W bounds the wait when the daemon never comes online).
    static func bridge(_ broker: MosquittoBroker) async throws -> (state: String, info: [String: Any]) {
        func next(_ topic: String) async throws -> String {
            try await MosquittoBroker.runTool(
                "/usr/bin/mosquitto_sub", ["-h", broker.host, "-p", "\(broker.port)", "-t", topic, "-C", "1", "-W", "60"])
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let state = try await next("ampel/bridge/state")
        let info = try await next("ampel/bridge/info")
        return (state, try #require(try JSONSerialization.jsonObject(with: Data(info.utf8)) as? [String: Any]))
    }

    static let truncated = #"{"version":1,"districts":{"09162":"red"},"devices":{"alice/phone":{"lat":48.137,"lon":11.5"#

    @Test("garbage or a truncated state.json: moved aside with its content, the daemon comes online and says so",
          arguments: [Data("\u{0}\u{7F}not a state file at all \u{1B}[".utf8), Data(truncated.utf8)])
    func badStateFile(content: Data) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try content.write(to: dir.appendingPathComponent("state.json"))
        // A temporary file of a write that a crash cut short, and one that is not of that pattern.
        try Data("half".utf8).write(to: dir.appendingPathComponent(".state.json.4194999.17.tmp"))
        try Data("mine".utf8).write(to: dir.appendingPathComponent("notes.tmp"))

        let daemon = try Daemon(["--broker", broker.url, "--state-dir", dir.path, "--source", "snapshot", "--log-level", "info"])
        let bridge: (state: String, info: [String: Any])
        do {
            bridge = try await Self.bridge(broker)
        } catch {
            _ = try? await daemon.stop()
            Issue.record("not online: \(error)\nstderr:\n\(daemon.stderr)")
            return
        }
        #expect(bridge.state == #"{"state":"online"}"#)
        let recovered = try #require(bridge.info["stateRecovered"] as? [String: Any], "bridge/info: \(bridge.info)")
        let movedTo = try #require(recovered["movedTo"] as? String)
        #expect(movedTo.hasPrefix(dir.path + "/state.json.corrupt-"))
        #expect(movedTo.wholeMatch(of: /.*\/state\.json\.corrupt-\d{8}T\d{6}Z/) != nil, "\(movedTo)")
        #expect((recovered["reason"] as? String)?.contains("not a valid state file") == true, "\(recovered)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: movedTo)) == content, "moved aside with its content intact")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent(".state.json.4194999.17.tmp").path))
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("notes.tmp").path))

        let status = try await daemon.stop()
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        let log = daemon.stderr
        #expect(log.contains("error") && log.contains("moved aside") && log.contains(movedTo), "\(log)")
        // The shutdown wrote a fresh, valid state file in its place.
        let fresh = try Data(contentsOf: dir.appendingPathComponent("state.json"))
        #expect((try? JSONSerialization.jsonObject(with: fresh)) != nil)
    }

    @Test("a corrupt data cache: moved aside, the daemon starts from the bundled snapshot, the next source")
    func badCache() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let garbage = Data(#"{"format":"ampel-incidence-cache","version":1,"districts":["#.utf8)
        try garbage.write(to: dir.appendingPathComponent("incidence.json"))
        // Nothing listens on the service's port: only the cache or the bundled data can start it.
        let port = try MosquittoBroker.freeLoopbackPort()
        let daemon = try Daemon(["--broker", broker.url, "--state-dir", dir.path, "--source", "rki",
                                 "--url", "http://127.0.0.1:\(port)/query", "--log-level", "info"])
        let bridge: (state: String, info: [String: Any])
        do {
            bridge = try await Self.bridge(broker)
        } catch {
            _ = try? await daemon.stop()
            Issue.record("not online: \(error)\nstderr:\n\(daemon.stderr)")
            return
        }
        #expect(bridge.state == #"{"state":"online"}"#)
        #expect(bridge.info["dataDate"] as? String == "2020-11-23", "the latest bundled snapshot: \(bridge.info)")
        let aside = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("incidence.json.corrupt-") }
        #expect(aside.count == 1, "\(aside)")
        if let name = aside.first {
            #expect(try Data(contentsOf: dir.appendingPathComponent(name)) == garbage)
        }
        let status = try await daemon.stop()
        #expect(status.exitCode == 0, "\(status)")
        #expect(daemon.stderr.contains("moved aside"), "\(daemon.stderr)")
    }
}

/// After a lost state the daemon rebuilds the device phases from its own retained device states
/// before it alerts anyone: a device that reports again in its phase gets no alert.
@Suite("ampel run rebuilds device phases from the broker after a lost state (built binary, real mosquitto)")
struct RunRebuildTests {
    /// On 2020-10-15: SK München red, LK München yellow, Altötting green; Stuttgart outside
    /// Bavaria, Vienna outside Germany (no district).
    static let places: [String: (lat: Double, lon: Double, phase: String)] = [
        "muenchen": (48.1374, 11.5755, "red"), "landkreis": (48.2489, 11.6528, "yellow"), "altoetting": (48.2264, 12.6770, "green"),
        "stuttgart": (48.7758, 9.1829, "outside"), "wien": (48.2082, 16.3738, "outside"),
    ]
    /// Device, input, where it is: a plain key with and without a language, an OwnTracks key of two levels.
    static let devices: [(key: String, place: String, lang: String?)] = [
        ("alice", "muenchen", nil), ("bob", "altoetting", nil), ("carol", "landkreis", "de"), ("dave/phone", "stuttgart", nil),
        ("erin", "wien", nil), ("frank", "muenchen", "de"),
    ]

    static func report(_ broker: MosquittoBroker, _ key: String, at place: String, tst: Int, lang: String?) async throws {
        let spot = try #require(places[place])
        let topic: String
        var payload: String
        if key.contains("/") {
            topic = "owntracks/" + key
            payload = #"{"_type":"location","lat":\#(spot.lat),"lon":\#(spot.lon),"tst":\#(tst)"#
        } else {
            topic = "ampel/location/" + key
            payload = #"{"lat":\#(spot.lat),"lon":\#(spot.lon),"tst":\#(tst)"#
        }
        if let lang { payload += #","lang":"\#(lang)""# }
        payload += "}"
        try await MosquittoBroker.runTool("/usr/bin/mosquitto_pub", ["-h", broker.host, "-p", "\(broker.port)", "-q", "1", "-t", topic, "-m", payload])
    }

    func start(_ broker: MosquittoBroker, _ dir: URL) throws -> RunRecoveryTests.Daemon {
        try RunRecoveryTests.Daemon(["--broker", broker.url, "--state-dir", dir.path, "--source", "snapshot", "--date", "2020-10-15",
                                     "--log-level", "info"])
    }

    /// The first run of each test: every device reports at `tst` 100 from its place, and the
    /// daemon stops cleanly.
    func firstRun(_ broker: MosquittoBroker, _ dir: URL, _ collector: RunCrashTests.Collector) async throws {
        let daemon = try start(broker, dir)
        try await collector.awaitBridge()
        try await daemon.awaitLog("subscribed")
        for device in Self.devices {
            try await Self.report(broker, device.key, at: device.place, tst: 100, lang: device.lang)
        }
        try await collector.awaitStates(Self.devices.map(\.key), tst: 100)
        let status = try await collector.stop(daemon)
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
    }

    @Test("garbage state.json and no journal: devices reporting again in their phase get no alert, one that moves gets exactly one, from its old phase")
    func rebuildFromRetainedStates() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let collector = try RunCrashTests.Collector(broker)
        defer { collector.stop() }
        let keys = Self.devices.map(\.key)

        try await firstRun(broker, dir, collector)
        var expected: [String: [String]] = [:]
        for device in Self.devices { expected[device.key] = ["null>\(Self.places[device.place]!.phase)"] }
        #expect(collector.alerts() == expected, "first run")

        // Nothing on disk remembers the devices any more: the state file is garbage, the journal gone.
        let garbage = Data("\u{0}garbage, not a state file".utf8)
        try garbage.write(to: dir.appendingPathComponent("state.json"))
        let segments = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("journal-") && $0.hasSuffix(".log") }
        #expect(!segments.isEmpty)
        for name in segments { try FileManager.default.removeItem(at: dir.appendingPathComponent(name)) }

        let daemon = try start(broker, dir)
        try await daemon.awaitLog("subscribed")
        // Everyone again where they were (a later fix), but bob has moved from Altötting (green) to München (red).
        for device in Self.devices {
            try await Self.report(broker, device.key, at: device.key == "bob" ? "muenchen" : device.place, tst: 200, lang: device.lang)
        }
        try await collector.awaitStates(keys, tst: 200)
        let status = try await collector.stop(daemon)
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        expected["bob", default: []].append("green>red")
        #expect(collector.alerts() == expected, "after the restart only bob's move is announced\n\(daemon.stderr)")

        // The goodbye's bridge/info (retained) says what was rebuilt.
        let info = try await MosquittoBroker.runTool(
            "/usr/bin/mosquitto_sub", ["-h", broker.host, "-p", "\(broker.port)", "-t", "ampel/bridge/info", "-C", "1", "-W", "30"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(info.utf8)) as? [String: Any])
        let recovered = try #require(json["stateRecovered"] as? [String: Any], "\(json)")
        #expect((recovered["movedTo"] as? String)?.hasPrefix(dir.path + "/state.json.corrupt-") == true, "\(recovered)")
        let rebuilt = try #require(recovered["rebuilt"] as? [String: Any], "\(recovered)")
        #expect(rebuilt["devices"] as? Int == Self.devices.count, "\(rebuilt)")
        #expect(rebuilt["known"] as? Int == 0, "\(rebuilt)")
        #expect(rebuilt["districts"] as? Int == 96, "\(rebuilt)")
        #expect(rebuilt["skipped"] as? Int == 0, "\(rebuilt)")
        #expect(rebuilt["expectedDevices"] as? Int == Self.devices.count, "\(rebuilt)")
        #expect(rebuilt["complete"] as? Bool == true, "\(rebuilt)")
        #expect(daemon.stderr.contains("rebuilt the device phases from the broker's retained states"), "\(daemon.stderr)")
        // The rebuild's snapshot and the stop's: a valid state file with every device again.
        let state = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("state.json"))) as? [String: Any])
        #expect(Set(((state["devices"] as? [String: Any]) ?? [:]).keys) == Set(keys))
    }

    @Test("state.json missing under a journal that continues from it: the journal's decisions win, the broker fills the rest, no alert repeats")
    func rebuildUnderJournal() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let collector = try RunCrashTests.Collector(broker)
        defer { collector.stop() }
        let keys = Self.devices.map(\.key)

        try await firstRun(broker, dir, collector)
        // bob moves in a second run, which dies before it writes a snapshot: the decision is
        // only in the journal (and in the broker's retained state).
        var daemon = try start(broker, dir)
        try await daemon.awaitLog("subscribed")
        try await Self.report(broker, "bob", at: "muenchen", tst: 200, lang: nil)
        try await collector.awaitStates(["bob"], tst: 200)
        daemon.process.signal(SIGKILL)
        _ = try await daemon.exit()
        // The snapshot goes; the journal segments after it stay.
        try FileManager.default.removeItem(at: dir.appendingPathComponent("state.json"))
        let segments = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("journal-") }.sorted()
        #expect(segments.first.map { $0 != "journal-00000001.log" } == true, "\(segments)")

        daemon = try start(broker, dir)
        try await daemon.awaitLog("subscribed")
        for device in Self.devices {
            try await Self.report(broker, device.key, at: device.key == "bob" ? "muenchen" : device.place, tst: 300, lang: device.lang)
        }
        try await collector.awaitStates(keys, tst: 300)
        _ = try await collector.stop(daemon)
        var expected: [String: [String]] = [:]
        for device in Self.devices { expected[device.key] = ["null>\(Self.places[device.place]!.phase)"] }
        expected["bob", default: []].append("green>red")
        #expect(collector.alerts() == expected, "\(daemon.stderr)")

        let info = try await MosquittoBroker.runTool(
            "/usr/bin/mosquitto_sub", ["-h", broker.host, "-p", "\(broker.port)", "-t", "ampel/bridge/info", "-C", "1", "-W", "30"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(info.utf8)) as? [String: Any])
        let recovered = try #require(json["stateRecovered"] as? [String: Any], "\(json)")
        #expect(recovered["movedTo"] is NSNull, "\(recovered)")
        #expect((recovered["reason"] as? String)?.contains("missing") == true, "\(recovered)")
        let rebuilt = try #require(recovered["rebuilt"] as? [String: Any], "\(recovered)")
        #expect(rebuilt["known"] as? Int == 1, "bob came from the journal: \(rebuilt)")
        #expect(rebuilt["devices"] as? Int == Self.devices.count - 1, "\(rebuilt)")
        #expect(rebuilt["complete"] as? Bool == true, "\(rebuilt)")
    }
}
