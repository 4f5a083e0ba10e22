import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` as a process: configuration errors stop it before it connects.
@Suite("ampel run (built binary)")
struct RunCommandTests {
    @Test("a bad config names key and line and exits 78 without connecting")
    func badConfig() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("ampel.yaml")
        try Data("broker: mqtt://127.0.0.1:1\nlamps:\n  - driver: hue\n    topic: x\n    district: '09162'\n".utf8).write(to: file)
        // Port 1: had it tried to connect, it would retry forever instead of exiting.
        let output = try await AmpelBinary.run(["run", "--config", file.path, "--state-dir", dir.appendingPathComponent("s").path])
        #expect(output.exitCode == 78)
        #expect(output.stderrText.contains("config line 3: lamps[0].driver: 'hue' is not a lamp driver"))

        let flag = try await AmpelBinary.run(["run", "--refresh", "soon", "--state-dir", dir.appendingPathComponent("s").path])
        #expect(flag.exitCode == 78)
        #expect(flag.stderrText.contains("--refresh"))

        let variable = try await AmpelBinary.run(["run", "--state-dir", dir.appendingPathComponent("s").path],
                                                 environment: ["AMPEL_SOURCE": "web", "PATH": "/usr/bin:/bin"])
        #expect(variable.exitCode == 78)
        #expect(variable.stderrText.contains("AMPEL_SOURCE"))
    }

    @Test("--check-config prints the effective configuration, flags over file")
    func checkConfig() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("ampel.yaml")
        try Data("broker: mqtt://file.example:1883\nlang: de\nalerts:\n  min_dwell: 3 fixes\n  max_fix_age: false\n".utf8).write(to: file)
        let output = try await AmpelBinary.run(["run", "--config", file.path, "--broker", "mqtts://flag.example", "--date", "2020-11-05",
                                                "--state-dir", dir.appendingPathComponent("s").path, "--check-config"])
        #expect(output.exitCode == 0)
        #expect(output.stdoutText.contains("broker: mqtts://flag.example:8883"))
        #expect(output.stdoutText.contains("language: de"))
        #expect(output.stdoutText.contains("snapshot on or before 2020-11-05"))
        // The alert rules, the defaults included.
        #expect(output.stdoutText.contains("alerts: expiry 3600 s, max fix age off, min dwell 3 fixes"), "\(output.stdoutText)")
        #expect(output.stdoutText.contains("max accuracy 1000 m"))
    }
}
