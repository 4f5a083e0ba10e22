import AmpelTestSupport
import Foundation
import Synchronization
import Testing

/// `ampel run` killed with SIGKILL at awkward moments, against a real mosquitto: every device
/// gets exactly one alert per phase change over the restarts, and its last state is right.
@Suite("ampel run survives kill -9 without repeating or losing an alert (built binary, real mosquitto)", .serialized)
struct RunCrashTests {
    static let muenchen = (48.1374, 11.5755)    // 09162, red on 2020-10-15
    static let altoetting = (48.2264, 12.6770)  // 09171, green on 2020-10-15

    /// Every alert, device state (keys of one level or more) and bridge state, read with
    /// `mosquitto_sub` (a process of its own that outlives the daemon's restarts).
    final class Collector: Sendable {
        typealias Record = (topic: String, payload: String)
        struct Seen: Sendable {
            var records: [Record] = []
            /// The newest `tst` of each device's state.
            var latest: [String: Int] = [:]
            var offline = 0
        }

        let process: ChildProcess
        private let seen = Watched(Seen())

        init(_ broker: MosquittoBroker) throws {
            let seen = self.seen
            let buffer = Mutex("")
            process = try ChildProcess(
                "/usr/bin/mosquitto_sub",
                ["-h", broker.host, "-p", "\(broker.port)", "-q", "1", "-v",
                 "-t", "ampel/device/#", "-t", "ampel/bridge/state"],
                output: .read { data in
                    let lines: [Substring] = buffer.withLock { buffer in
                        buffer += String(decoding: data, as: UTF8.self)
                        guard let end = buffer.lastIndex(of: "\n") else { return [] }
                        defer { buffer.removeSubrange(...end) }
                        return buffer[..<end].split(separator: "\n")
                    }
                    guard !lines.isEmpty else { return }
                    seen.update { seen in
                        for line in lines {
                            guard let space = line.firstIndex(of: " ") else { continue }
                            let record = (String(line[..<space]), String(line[line.index(after: space)...]))
                            seen.records.append(record)
                            if record.0 == "ampel/bridge/state", record.1.contains("offline") { seen.offline += 1 }
                            if record.0.hasSuffix("/state"), let tst = Self.field("tst", record.1) as? Int {
                                let key = Self.key(record.0, suffix: "/state")
                                seen.latest[key] = max(seen.latest[key] ?? 0, tst)
                            }
                        }
                    }
                }, errors: .discard, onExit: { _ in })
        }

        static func key(_ topic: String, suffix: String) -> String {
            String(topic.dropFirst("ampel/device/".count).dropLast(suffix.count))
        }

        static func field(_ name: String, _ payload: String) -> Any? {
            (try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])?[name]
        }

        /// The `from`>`to` of every alert, per device key.
        func alerts() -> [String: [String]] {
            var result: [String: [String]] = [:]
            for record in seen.value.records where record.topic.hasSuffix("/alert") {
                let from = Self.field("from", record.payload) as? String ?? "null"
                let to = Self.field("to", record.payload).flatMap { ($0 as? [String: Any])?["phase"] as? String ?? $0 as? String } ?? "?"
                result[Self.key(record.topic, suffix: "/alert"), default: []].append("\(from)>\(to)")
            }
            return result
        }

        /// Until a bridge state arrives: the subscription is live.
        func awaitBridge() async throws {
            let seen = self.seen
            try await withTimeout(.seconds(60), "a bridge state") {
                await seen.wait { $0.records.contains { $0.topic == "ampel/bridge/state" } }
            }
        }

        /// Until every device's latest state has `tst`.
        func awaitStates(_ keys: [String], tst: Int) async throws {
            let seen = self.seen
            try await withTimeout(.seconds(60), "every device state at tst \(tst)") {
                await seen.wait { seen in keys.allSatisfy { (seen.latest[$0] ?? 0) >= tst } }
            }
        }

        /// Stops `daemon` with SIGTERM and waits for its `offline`: the broker forwards one
        /// connection's messages in order, so every alert the daemon sent has arrived here too.
        func stop(_ daemon: RunRecoveryTests.Daemon) async throws -> ChildProcess.Status {
            let before = seen.value.offline
            let status = try await daemon.stop()
            let seen = self.seen
            try await withTimeout(.seconds(30), "the daemon's offline") { await seen.wait { $0.offline > before } }
            return status
        }

        func stop() { process.signal(SIGTERM) }
    }

    /// One QoS 1 fix per device on the plain input (`ampel/location/<key>`), 20 publishers at a time.
    static func round(_ broker: MosquittoBroker, devices: Int, tst: Int, at place: (Double, Double)) async throws {
        var script = ""
        for index in 0..<devices {
            script += "/usr/bin/mosquitto_pub -h \(broker.host) -p \(broker.port) -q 1 -t ampel/location/dev\(index) "
            script += "-m '{\"lat\":\(place.0),\"lon\":\(place.1),\"tst\":\(tst)}' &\n"
            if index % 20 == 19 { script += "wait\n" }
        }
        script += "wait\n"
        _ = try await MosquittoBroker.runTool("/bin/sh", ["-c", script])
    }

    func start(_ broker: MosquittoBroker, _ dir: URL, environment: [String: String] = [:]) throws -> RunRecoveryTests.Daemon {
        try RunRecoveryTests.Daemon(["--broker", broker.url, "--state-dir", dir.path, "--source", "snapshot", "--date", "2020-10-15",
                                     "--log-level", "info"], environment: environment)
    }

    @Test("devices cross a phase border in rounds; the daemon is killed 0 ms to 1.5 s after each round: no alert lost, a repeat only in the witness gap")
    func killAfterCrossings() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let collector = try Collector(broker)
        defer { collector.stop() }
        let devices = 40
        let keys = (0..<devices).map { "dev\($0)" }
        let delays: [Duration] = [.zero, .milliseconds(5), .milliseconds(20), .milliseconds(80), .milliseconds(300), .milliseconds(1500)]
        var daemon = try start(broker, dir)
        try await collector.awaitBridge()
        var expected: [String] = []
        var logs: [String] = []
        var previous = "null"
        for (round, delay) in delays.enumerated() {
            let place = round % 2 == 0 ? Self.muenchen : Self.altoetting
            let phase = round % 2 == 0 ? "red" : "green"
            expected.append("\(previous)>\(phase)")
            previous = phase
            try await Self.round(broker, devices: devices, tst: 1000 + round, at: place)
            if delay > .zero { try await Task.sleep(for: delay) }
            daemon.process.signal(SIGKILL)
            _ = try await daemon.exit()
            logs.append(daemon.stderr)
            daemon = try start(broker, dir)
            try await collector.awaitStates(keys, tst: 1000 + round)
        }
        // Its SIGTERM handling is in place once it has subscribed.
        try await daemon.awaitLog("subscribed")
        let status = try await collector.stop(daemon)
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        // None lost, in order. A repeat is possible only when the process died in the moment
        // between handing an alert and its witness (the state after it) to the kernel
        // (docs/DESIGN.md, "The journal"): at most one per crash, and each is counted.
        let alerts = collector.alerts()
        var repeats = 0
        for key in keys {
            let received = alerts[key] ?? []
            var distinct: [String] = []
            for alert in received where distinct.last != alert { distinct.append(alert) }
            repeats += received.count - distinct.count
            #expect(distinct == expected, "\(key): \(received)")
        }
        print("kill -9 during \(delays.count) rounds of \(devices) crossings: \(repeats) alerts repeated")
        #expect(repeats <= delays.count, "\(repeats) repeats over \(delays.count) crashes")
        if repeats > 0 { print(logs.joined(separator: "\n=====\n")) }
    }

    @Test("killed between deciding an alert and handing it over: the restart sends exactly the ones not sent")
    func killBetweenDecisionAndPublish() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let collector = try Collector(broker)
        defer { collector.stop() }
        let devices = 30
        let keys = (0..<devices).map { "dev\($0)" }
        var daemon = try start(broker, dir)
        try await collector.awaitBridge()
        try await Self.round(broker, devices: devices, tst: 100, at: Self.muenchen)
        try await collector.awaitStates(keys, tst: 100)
        _ = try await daemon.stop()
        // The 12th alert of this run is journaled, then the process dies before handing it over.
        daemon = try start(broker, dir, environment: ["AMPEL_TEST_CRASH_AFTER_ALERTS": "12"])
        try await daemon.awaitLog("subscribed")
        try await Self.round(broker, devices: devices, tst: 200, at: Self.altoetting)
        let crashed = try await daemon.exit()
        #expect(crashed.signal == SIGKILL, "\(crashed)")
        daemon = try start(broker, dir)
        try await collector.awaitStates(keys, tst: 200)
        try await daemon.awaitLog("subscribed")
        _ = try await collector.stop(daemon)
        let alerts = collector.alerts()
        for key in keys {
            #expect(alerts[key] ?? [] == ["null>red", "red>green"], "\(key): \(alerts[key] ?? [])")
        }
    }
}
