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
        private let collected = Watched("")
        private let exits: AsyncStream<ChildProcess.Status>


        /// - Parameter environment: added to the daemon's environment (through `env`).
        init(_ arguments: [String], environment: [String: String] = [:]) throws {
            let (exits, continuation) = AsyncStream.makeStream(of: ChildProcess.Status.self)
            self.exits = exits
            let collected = self.collected
            let binary = try AmpelBinary.url().path
            let settings = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            process = try ChildProcess(
                environment.isEmpty ? binary : "/usr/bin/env",
                (environment.isEmpty ? [] : settings + [binary]) + ["run"] + arguments, output: .discard,
                errors: .read { data in collected.update { $0 += String(decoding: data, as: UTF8.self) } },
                onExit: { status in
                    continuation.yield(status)
                    continuation.finish()
                })
        }

        /// A test that ends half-way (a failed expectation, a timeout) takes its daemon with it:
        /// none keeps running against a broker that is gone.
        deinit {
            process.signal(SIGKILL)
        }

        var stderr: String { collected.value }

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
