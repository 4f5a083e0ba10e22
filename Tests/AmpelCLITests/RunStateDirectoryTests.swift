import AmpelTestSupport
import Foundation
import Testing

/// One state directory and one set of sources for every command (docs/cli.md, "State
/// directory" and "Data sources"): `ampel fetch` fills the cache `ampel run` starts from, and
/// `run --source bundled` answers with the data `check --source bundled` answers with.
@Suite("ampel run shares its state directory and sources with the other commands (built binary, real mosquitto)")
struct RunStateDirectoryTests {
    @Test("ampel fetch without --state-dir fills the cache ampel run without --state-dir starts from")
    func fetchFeedsRun() async throws {
        try await Scene.run { scene in
            let home = scene.dir.appendingPathComponent("home")
            let xdg = scene.dir.appendingPathComponent("xdg")
            let csv = scene.dir.appendingPathComponent("rki.csv")
            try RKIDistrictFile(from: "2021-07-25", to: "2021-08-21").render().write(to: csv)
            // Nothing names a state directory: the defaults decide, for both commands alike.
            let environment = ["HOME": home.path, "XDG_STATE_HOME": xdg.path, "AMPEL_STATE_DIR": "", "STATE_DIRECTORY": ""]
            var fetchEnvironment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            fetchEnvironment["NO_COLOR"] = "1"
            let fetch = try await AmpelBinary.run(["fetch", "--url", csv.absoluteString], environment: fetchEnvironment)
            #expect(fetch.exitCode == 0, "\(fetch.stderrText)")
            let cache = xdg.appendingPathComponent("ampel/incidence.json")
            #expect(fetch.stdoutText.contains("cache: \(cache.path)"), "\(fetch.stdoutText)")

            // The daemon's source is a file that is gone: its first check fails and the data in
            // force is what fetch cached, not the bundled stand-in a fresh state directory starts on.
            let gone = scene.dir.appendingPathComponent("gone.csv")
            let mark = scene.collector.mark
            try await withDaemon(["--broker", scene.broker.url, "--source", "rki", "--url", gone.absoluteString, "--log-level", "info"],
                                 environment: environment) { daemon in
                try await scene.collector.wait("bridge/info on the fetched data of 2021-08-21", since: mark) { records in
                    records.contains { $0.topic == "ampel/bridge/info" && Scene.Collector.field("dataDate", $0.payload) as? String == "2021-08-21" }
                }
                try await daemon.awaitLog("subscribed")
                let status = try await scene.collector.stop(daemon)
                #expect(status.exitCode == 0, "\(daemon.stderr)")
                // Its own state went there too (a stop under load may leave it to the journal alone).
                let names = try FileManager.default.contentsOfDirectory(atPath: xdg.appendingPathComponent("ampel").path)
                #expect(names.contains { $0 == "state.json" || $0.hasPrefix("journal-") }, "\(names)")
            }
        }
    }

    @Test("run --source bundled runs on the data check --source bundled answers from")
    func bundledSource() async throws {
        let check = try await AmpelBinary.run(plain: ["check", "--source", "bundled", "--district", "09162", "--json"])
        #expect(check.exitCode == 0, "\(check.stderrText)")
        let signal = try #require(try JSONSerialization.jsonObject(with: Data(check.stdoutText.utf8)) as? [String: Any])
        let day = try #require(signal["dataDate"] as? String)

        var options = Scene.Options()
        options.source = "bundled"
        options.date = nil
        try await Scene.run(options) { scene in
            try await scene.start()
            try await scene.collector.wait("bridge/info on the data of \(day)") { records in
                records.contains { $0.topic == "ampel/bridge/info" && Scene.Collector.field("dataDate", $0.payload) as? String == day }
            }
            try await scene.stop()
        }
    }

    @Test("a daemon that kept its state in ./ampel-state is told where it went and how to keep it; naming it keeps it")
    func formerDefault() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let former = dir.appendingPathComponent("ampel-state")
        try FileManager.default.createDirectory(at: former, withIntermediateDirectories: true)
        try Data("{}".utf8).write(to: former.appendingPathComponent("state.json"))
        func run(_ arguments: [String]) async throws -> String {
            // In that directory, as the daemon started there before; nothing names a state directory.
            var environment = ProcessInfo.processInfo.environment
            environment["HOME"] = "\(dir.path)/home"
            for name in ["XDG_STATE_HOME", "AMPEL_STATE_DIR", "STATE_DIRECTORY", "AMPEL_CONFIG"] { environment[name] = "" }
            let result = try await AmpelBinary.run(["run", "--check-config"] + arguments, environment: environment, directory: dir,
                                                   errorsIntoOutput: true)
            try #require(result.exitCode == 0, "\(result.stdoutText)")
            return result.stdoutText
        }
        let moved = try await run([])
        #expect(moved.contains("state dir: \(dir.path)/home/.local/state/ampel"), "\(moved)")
        #expect(moved.contains("warning"), "\(moved)")
        #expect(moved.contains("\(former.path) holds a state that this run does not use"), "\(moved)")
        #expect(moved.contains("--state-dir ampel-state"), "\(moved)")

        let kept = try await run(["--state-dir", "ampel-state"])
        #expect(kept.contains("state dir: ampel-state"), "\(kept)")
        #expect(!kept.contains("holds a state"), "\(kept)")
    }
}
