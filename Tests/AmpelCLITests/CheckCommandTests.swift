import AmpelTestSupport
import Foundation
import Testing

/// `ampel check`, `districts` and `rules` as a user runs them: the built binary.
@Suite struct CheckCommandTests {
    func json(_ output: AmpelBinary.Output) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: output.stdout) as? [String: Any], "stdout: \(output.stdoutText) stderr: \(output.stderrText)")
    }

    @Test func munichAsJSONIsTheSignalContract() async throws {
        let out = try await AmpelBinary.run(["check", "--district", "09162", "--date", "2020-10-15", "--lang", "de", "--json"])
        #expect(out.exitCode == 0)
        let signal = try json(out)
        #expect(Set(signal.keys) == ["district", "incidence", "phase", "color", "dataDate", "ruleSet", "lang", "title", "rules", "always", "stale",
                                    "measuredPhase", "since", "trend", "complete", "indicators", "reason"])
        #expect(signal["trend"] is NSNull, "a snapshot has no history")
        let district = try #require(signal["district"] as? [String: Any])
        #expect(district["ags"] as? String == "09162")
        #expect(district["name"] as? String == "SK München")
        #expect(district["state"] as? String == "Bayern")
        #expect(signal["dataDate"] as? String == "2020-10-15")
        #expect(signal["lang"] as? String == "de")
        #expect(signal["ruleSet"] as? String == "bavaria")
        let incidence = try #require(signal["incidence"] as? Double)
        let expected = incidence < 35 ? "green" : incidence <= 50 ? "yellow" : incidence <= 100 ? "red" : "darkred"
        #expect(signal["phase"] as? String == expected)
        #expect((signal["always"] as? [String])?.count == 4)
        #expect((signal["rules"] as? [String])?.isEmpty == false)
    }

    @Test func terminalAnswerIsColouredAndReadable() async throws {
        // Standard output is a file here: colour only because it is asked for.
        let out = try await AmpelBinary.run(["check", "--district", "09162", "--date", "2020-11-05", "--lang", "en", "--color", "always"],
                                            environment: ["PATH": "/usr/bin:/bin", "TERM": "xterm-256color"])
        #expect(out.exitCode == 0)
        #expect(out.stdoutText.contains("\u{1B}[1;38;2;139;0;0m"), "dark red in true colour")
        #expect(out.stdoutText.contains("SK München"))
        #expect(out.stdoutText.contains("2020-11-05"))
        let plain = try await AmpelBinary.run(["check", "--district", "09162", "--date", "2020-11-05", "--lang", "en"],
                                              environment: ["NO_COLOR": "1"])
        #expect(!plain.stdoutText.contains("\u{1B}["))
        #expect(plain.stdoutText.contains("DARK RED"))
    }

    @Test func languageComesFromTheEnvironment() async throws {
        let german = try await AmpelBinary.run(["check", "--district", "09162", "--json"], environment: ["LANG": "de_DE.UTF-8"])
        #expect(try json(german)["lang"] as? String == "de")
        let french = try await AmpelBinary.run(["check", "--district", "09162", "--json"], environment: ["LANG": "fr_FR.UTF-8"])
        #expect(try json(french)["lang"] as? String == "en")
        let flag = try await AmpelBinary.run(["check", "--district", "09162", "--json", "--lang", "de"], environment: ["LANG": "en_US.UTF-8"])
        #expect(try json(flag)["lang"] as? String == "de")
    }

    @Test func threePhaseRuleSetNeverSaysDarkRed() async throws {
        let out = try await AmpelBinary.run(["check", "--district", "09162", "--date", "2020-11-05", "--rules", "bavaria-initial", "--json"])
        let signal = try json(out)
        #expect(try #require(signal["incidence"] as? Double) > 100)
        #expect(signal["phase"] as? String == "red")
        #expect(signal["ruleSet"] as? String == "bavaria-initial")
    }

    @Test func errorsAreClearAndNonZero() async throws {
        let unknown = try await AmpelBinary.run(["check", "--district", "99999"])
        #expect(unknown.exitCode != 0)
        #expect(unknown.stderrText.contains("unknown district '99999'"))
        let early = try await AmpelBinary.run(["check", "--district", "09162", "--date", "2020-01-01"])
        #expect(early.exitCode != 0)
        #expect(early.stderrText.contains("2020-10-15"))
        let badFlag = try await AmpelBinary.run(["check", "--district", "9162"])
        #expect(badFlag.exitCode == 64)
        let badDate = try await AmpelBinary.run(["check", "--district", "09162", "--date", "05.11.2020"])
        #expect(badDate.exitCode == 64)
        let badRules = try await AmpelBinary.run(["check", "--district", "09162", "--rules", "nonsense"])
        #expect(badRules.exitCode != 0)
        #expect(badRules.stderrText.contains("unknown rule set"))
    }

    @Test(arguments: [
        (48.1374, 11.5755, "09162", "darkred"),   // Marienplatz, SK München
        (48.0667, 11.6167, "09184", "darkred"),   // Unterhaching, LK München
        (47.8408, 12.9772, "09172", "darkred"),   // Freilassing, LK Berchtesgadener Land
        (48.3985, 9.9916, "08421", "outside"),    // Ulm Münster: Germany, not Bavaria
    ])
    func positionsResolveToTheirDistrict(lat: Double, lon: Double, ags: String, phase: String) async throws {
        let out = try await AmpelBinary.run(["check", "--lat", "\(lat)", "--lon", "\(lon)", "--date", "2020-11-05", "--json"])
        #expect(out.exitCode == 0, "\(out.stderrText)")
        let signal = try json(out)
        #expect((signal["district"] as? [String: Any])?["ags"] as? String == ags)
        #expect(signal["phase"] as? String == phase)
    }

    @Test func salzburgIsOutsideGermany() async throws {
        let out = try await AmpelBinary.run(["check", "--lat", "47.8095", "--lon", "13.0550", "--json"])
        let signal = try json(out)
        #expect(signal["phase"] as? String == "outside")
        #expect(signal["district"] is NSNull)
        #expect(signal["incidence"] is NSNull)
    }

    @Test func invalidPositionsAreRejected() async throws {
        for args in [["--lat", "91", "--lon", "11"], ["--lat", "48", "--lon", "181"], ["--lat", "nan", "--lon", "11"]] {
            let out = try await AmpelBinary.run(["check"] + args)
            #expect(out.exitCode != 0, "\(args)")
        }
    }
}

/// `ampel check` and `ampel districts` on the live source (`--source rki`, `--url`) against the
/// loopback RKI server, and on a snapshot file.
@Suite struct CheckWithDataSourceTests {
    @Test func checkAndDistrictsReadTheLiveSource() async throws {
        try await withServer(serving: "2020-11-23") { server in
            let raw = try rawBavarianIncidences(day: "2020-11-23")
            let check = try await AmpelBinary.run(plain: ["check", "--district", "09162", "--source", "arcgis", "--url", server.queryURL, "--json"])
            #expect(check.exitCode == 0, "\(check.stderrText)")
            let signal = try #require(try JSONSerialization.jsonObject(with: Data(check.stdoutText.utf8)) as? [String: Any])
            #expect((signal["incidence"] as? NSNumber)?.doubleValue == raw["09162"])
            #expect(signal["dataDate"] as? String == "2020-11-23")
            #expect(signal["phase"] as? String == expectedPhase(raw["09162"]!))

            // --url alone implies --source rki.
            let districts = try await AmpelBinary.run(plain: ["districts", "--source", "arcgis", "--url", server.queryURL, "--json"])
            #expect(districts.exitCode == 0, "\(districts.stderrText)")
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(districts.stdoutText.utf8)) as? [[String: Any]])
            #expect(rows.count == 96)
            for row in rows {
                let ags = try #require(row["ags"] as? String)
                #expect(row["phase"] as? String == expectedPhase(raw[ags]!), "\(ags)")
            }
            #expect(server.requestCount == 2)

            // An empty state directory: no cached data to fall back on, so the failure is the answer.
            let empty = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: empty) }
            server.inject(.renamedField(from: "cases7_per_100k", to: "inzidenz"))
            let broken = try await AmpelBinary.run(plain: ["check", "--district", "09162", "--source", "arcgis", "--url", server.queryURL, "--state-dir", empty.path])
            #expect(broken.exitCode == 1)
            #expect(broken.stderrText.contains("cases7_per_100k"), "\(broken.stderrText)")
            #expect(broken.stderrText.contains("no cached data"), "\(broken.stderrText)")

            let conflict = try await AmpelBinary.run(plain: ["check", "--district", "09162", "--source", "history", "--url", server.queryURL])
            #expect(conflict.exitCode == 64)
        }
    }

    @Test func snapshotFilesAreAcceptedByTheCLI() async throws {
        let check = try await AmpelBinary.run(plain: ["check", "--district", "09162", "--snapshot", RecordedRKI.url(day: "2020-10-15").path, "--json"])
        #expect(check.exitCode == 0, "\(check.stderrText)")
        #expect(check.stdoutText.contains("\"dataDate\":\"2020-10-15\""))
    }
}
