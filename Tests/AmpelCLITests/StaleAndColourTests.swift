import AmpelTestSupport
import Foundation
import Testing

/// `ampel check` and `ampel districts` when the RKI service fails: they answer from the cached
/// last good data in the state directory, marked stale; and when nothing answers at all, the
/// error names the real cause.
@Suite struct StaleAnswerTests {
    @Test func aFailingServiceIsAnsweredFromTheCacheMarkedStale() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withServer(serving: "2020-11-23") { server in
            let fetched = try await AmpelBinary.run(plain: ["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", dir.path])
            #expect(fetched.exitCode == 0, "\(fetched.stderrText)")
            // From now on the service fails (404 is not retried, so the test does not wait for backoff).
            server.inject(.status(404), times: 100)

            let check = try await AmpelBinary.run(plain: ["check", "--district", "09162", "--source", "arcgis", "--url", server.queryURL,
                                            "--state-dir", dir.path, "--json"])
            #expect(check.exitCode == 0, "\(check.stderrText)")
            let signal = try #require(try JSONSerialization.jsonObject(with: Data(check.stdoutText.utf8)) as? [String: Any], "\(check.stdoutText)")
            #expect(signal["stale"] as? Bool == true)
            #expect(signal["dataDate"] as? String == "2020-11-23")
            #expect(signal["phase"] as? String == expectedPhase(try rawBavarianIncidences(day: "2020-11-23")["09162"]!))
            #expect(check.stderrText.contains("Warning: Stale: the RKI service failed (") && check.stderrText.contains("HTTP 404"), "\(check.stderrText)")

            let human = try await AmpelBinary.run(plain: ["check", "--district", "09162", "--source", "arcgis", "--url", server.queryURL, "--state-dir", dir.path])
            #expect(human.exitCode == 0, "\(human.stderrText)")
            #expect(human.stdoutText.contains("Data of 2020-11-23 (stale)"), "\(human.stdoutText)")
            #expect(human.stdoutText.contains("Stale: the RKI service failed"), "\(human.stdoutText)")
            #expect(!human.stdoutText.contains("Error"))

            // AMPEL_STATE_DIR instead of the flag, as for `ampel fetch` and `ampel run`.
            var environment = ProcessInfo.processInfo.environment
            environment["AMPEL_STATE_DIR"] = dir.path
            environment["NO_COLOR"] = "1"
            let districts = try await AmpelBinary.run(["districts", "--source", "arcgis", "--url", server.queryURL, "--json"], environment: environment)
            #expect(districts.exitCode == 0, "\(districts.stderrText)")
            let rows = try #require(try JSONSerialization.jsonObject(with: districts.stdout) as? [[String: Any]])
            #expect(rows.count == 96)
            #expect(rows.allSatisfy { $0["stale"] as? Bool == true && $0["dataDate"] as? String == "2020-11-23" })
            let table = try await AmpelBinary.run(["districts", "--source", "arcgis", "--url", server.queryURL], environment: environment)
            #expect(table.exitCode == 0)
            #expect(table.stdoutText.contains("STALE") && table.stdoutText.contains("Stale: the RKI service failed"), "\(table.stdoutText)")

            // With the service back the answer is fresh again.
            server.clearFaults()
            let fresh = try await AmpelBinary.run(plain: ["check", "--district", "09162", "--source", "arcgis", "--url", server.queryURL,
                                            "--state-dir", dir.path, "--json"])
            let freshSignal = try #require(try JSONSerialization.jsonObject(with: Data(fresh.stdoutText.utf8)) as? [String: Any])
            #expect(freshSignal["stale"] as? Bool == false)
            #expect(!fresh.stderrText.contains("Stale"))
        }
    }

    @Test func nothingListeningSaysConnectionRefused() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let port = try MosquittoBroker.freeLoopbackPort()
        let out = try await AmpelBinary.run(plain: ["check", "--district", "09162", "--source", "arcgis", "--url", "http://127.0.0.1:\(port)/query",
                                      "--state-dir", dir.path])
        #expect(out.exitCode == 1)
        #expect(out.stderrText.contains("cannot reach 127.0.0.1:\(port): connection refused"), "\(out.stderrText)")
        #expect(!out.stderrText.lowercased().contains("reset"), "\(out.stderrText)")
    }
}

/// Colours: only on a terminal without `NO_COLOR` (no-color.org), unless `--color` decides.
@Suite struct ColourTests {
    static let check = ["check", "--district", "09162", "--date", "2020-11-05", "--lang", "en"]
    static let escape = "\u{1B}["

    /// The environment of the test process without `NO_COLOR`, with a colour-capable `TERM`.
    func environment(noColor: String?) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = noColor
        environment["TERM"] = "xterm-256color"
        return environment
    }

    /// Runs `ampel` with standard output on a pseudo-terminal (util-linux `script`).
    func onTerminal(_ arguments: [String], noColor: String?) async throws -> String {
        var environment = self.environment(noColor: noColor)
        environment["SHELL"] = "/bin/sh"
        let run = try await AmpelBinary.run(arguments, environment: environment, errorsIntoOutput: true, terminal: true)
        #expect(run.exitCode == 0, "\(run.stdoutText)")
        return run.stdoutText
    }

    @Test func notATerminalMeansNoColour() async throws {
        let out = try await AmpelBinary.run(Self.check, environment: environment(noColor: nil))
        #expect(out.exitCode == 0)
        #expect(out.stdoutText.contains("DARK RED"))
        #expect(!out.stdoutText.contains(Self.escape), "standard output is a pipe")
        let districts = try await AmpelBinary.run(["districts", "--date", "2020-11-05"], environment: environment(noColor: nil))
        #expect(!districts.stdoutText.contains(Self.escape))
    }

    @Test func aTerminalIsColouredUnlessNoColorIsSetAndNotEmpty() async throws {
        let coloured = try await onTerminal(Self.check, noColor: nil)
        #expect(coloured.contains("\u{1B}[1;38;2;139;0;0m"), "\(coloured)")
        // no-color.org: an empty NO_COLOR does not count.
        let empty = try await onTerminal(Self.check, noColor: "")
        #expect(empty.contains("\u{1B}[1;38;2;139;0;0m"), "\(empty)")
        let plain = try await onTerminal(Self.check, noColor: "1")
        #expect(plain.contains("DARK RED"))
        #expect(!plain.contains(Self.escape), "\(plain)")
        let never = try await onTerminal(Self.check + ["--color", "never"], noColor: nil)
        #expect(!never.contains(Self.escape), "\(never)")
    }

    @Test func colorAlwaysForcesColourEvenWithNoColorAndAFile() async throws {
        let out = try await AmpelBinary.run(Self.check + ["--color", "always"], environment: environment(noColor: "1"))
        #expect(out.exitCode == 0)
        #expect(out.stdoutText.contains("\u{1B}[1;38;2;139;0;0m"))
        let districts = try await AmpelBinary.run(["districts", "--date", "2020-11-05", "--color", "always"], environment: environment(noColor: "1"))
        #expect(districts.stdoutText.contains(Self.escape))
        let bad = try await AmpelBinary.run(Self.check + ["--color", "sometimes"], environment: environment(noColor: nil))
        #expect(bad.exitCode == 64)
    }
}
