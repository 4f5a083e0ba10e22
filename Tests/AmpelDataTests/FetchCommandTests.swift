import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Testing

/// `ampel fetch`, `check` and `districts` with `--source rki`: the built binary against the loopback server.
@Suite struct FetchCommandTests {
    @Test func fetchValidatesCachesAndSummarises() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let raw = try rawBavarianIncidences(day: "2020-11-05")
        var counts: [String: Int] = ["green": 0, "yellow": 0, "red": 0, "darkred": 0]
        for incidence in raw.values { counts[expectedPhase(incidence), default: 0] += 1 }

        try await withServer(serving: "2020-11-05", maxRecordCount: 200) { server in
            let first = try await runAmpel(["fetch", "--url", server.queryURL, "--state-dir", directory.path])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.contains("RKI data of 2020-11-05: 412 districts, 96 in Bayern"), "\(first.stdout)")
            let phaseLine = ["green", "yellow", "red", "darkred"].map { "\($0) \(counts[$0] ?? 0)" }.joined(separator: " · ")
            #expect(first.stdout.contains(phaseLine), "\(first.stdout) vs \(phaseLine)")
            #expect(server.requestCount == 3, "412 districts in pages of 200")
            #expect(server.requests.allSatisfy { $0.userAgent?.hasPrefix("ampel/") == true })
            let cached = try #require(try DatasetCache(directory: directory).load())
            #expect(cached.dataset.date == day("2020-11-05"))
            #expect(cached.dataset.districts.count == 412)

            let again = try await runAmpel(["fetch", "--url", server.queryURL, "--state-dir", directory.path, "--json"])
            #expect(again.status == 0)
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
            #expect(summary["status"] as? String == "unchanged")
            #expect(summary["date"] as? String == "2020-11-05")
            #expect(summary["regionDistricts"] as? Int == 96)
            #expect(summary["phases"] as? [String: Int] == counts)

            // An older publication is rejected and the cache stays.
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-10-15"))
            let older = try await runAmpel(["fetch", "--url", server.queryURL, "--state-dir", directory.path])
            #expect(older.status == 3)
            #expect(older.stderr.contains("(outdated)"), "\(older.stderr)")
            #expect(try DatasetCache(directory: directory).load()?.dataset.date == day("2020-11-05"))

            // A newer one is taken and reports the phase changes.
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-11-23"))
            let newer = try await runAmpel(["fetch", "--url", server.queryURL, "--state-dir", directory.path, "--json"])
            #expect(newer.status == 0, "\(newer.stderr)")
            let update = try #require(try JSONSerialization.jsonObject(with: Data(newer.stdout.utf8)) as? [String: Any])
            #expect(update["status"] as? String == "updated")
            let after = try rawBavarianIncidences(day: "2020-11-23")
            let expected = raw.keys.filter { expectedPhase(raw[$0]!) != expectedPhase(after[$0]!) }.sorted()
            #expect(update["changedDistricts"] as? [String] == expected)
            #expect(try DatasetCache(directory: directory).load()?.dataset.date == day("2020-11-23"))
        }
    }

    @Test func fetchExitCodesForBadAnswers() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withServer(serving: "2020-11-05") { server in
            server.inject(.status(500), times: 1)
            let unreachable = try await runAmpel(["fetch", "--url", server.queryURL, "--state-dir", directory.path, "--retries", "0"])
            #expect(unreachable.status == 2)
            #expect(unreachable.stderr.contains("HTTP 500"), "\(unreachable.stderr)")

            server.inject(.arcgisError(code: 400, message: "Cannot perform query. Invalid query parameters."))
            let invalid = try await runAmpel(["fetch", "--url", server.queryURL, "--state-dir", directory.path])
            #expect(invalid.status == 3)
            #expect(invalid.stderr.contains("(api-error)"), "\(invalid.stderr)")
            #expect(invalid.stderr.contains("Invalid query parameters"))
            #expect(try DatasetCache(directory: directory).load() == nil, "nothing cached from bad answers")

            // A state directory that cannot be created: the data is fine, the cache is not.
            let blocker = directory.appendingPathComponent("file")
            try Data("x".utf8).write(to: blocker)
            let noCache = try await runAmpel(["fetch", "--url", server.queryURL, "--state-dir", blocker.appendingPathComponent("state").path])
            #expect(noCache.status == 4, "\(noCache.stderr)")
            #expect(noCache.stdout.contains("RKI data of 2020-11-05"))

            let usage = try await runAmpel(["fetch", "--timeout", "-1"])
            #expect(usage.status == 64)
            let badURL = try await runAmpel(["fetch", "--url", "ftp://127.0.0.1/query", "--state-dir", directory.path])
            #expect(badURL.status == 64)
            #expect(badURL.stderr.contains("http(s) URL"))
        }
    }

    @Test func checkAndDistrictsReadTheLiveSource() async throws {
        try await withServer(serving: "2020-11-23") { server in
            let raw = try rawBavarianIncidences(day: "2020-11-23")
            let check = try await runAmpel(["check", "--district", "09162", "--source", "rki", "--url", server.queryURL, "--json"])
            #expect(check.status == 0, "\(check.stderr)")
            let signal = try #require(try JSONSerialization.jsonObject(with: Data(check.stdout.utf8)) as? [String: Any])
            #expect((signal["incidence"] as? NSNumber)?.doubleValue == raw["09162"])
            #expect(signal["dataDate"] as? String == "2020-11-23")
            #expect(signal["phase"] as? String == expectedPhase(raw["09162"]!))

            // --url alone implies --source rki.
            let districts = try await runAmpel(["districts", "--url", server.queryURL, "--json"])
            #expect(districts.status == 0, "\(districts.stderr)")
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(districts.stdout.utf8)) as? [[String: Any]])
            #expect(rows.count == 96)
            for row in rows {
                let ags = try #require(row["ags"] as? String)
                #expect(row["phase"] as? String == expectedPhase(raw[ags]!), "\(ags)")
            }
            #expect(server.requestCount == 2)

            server.inject(.renamedField(from: "cases7_per_100k", to: "inzidenz"))
            let broken = try await runAmpel(["check", "--district", "09162", "--source", "rki", "--url", server.queryURL])
            #expect(broken.status == 1)
            #expect(broken.stderr.contains("cases7_per_100k"), "\(broken.stderr)")

            let conflict = try await runAmpel(["check", "--district", "09162", "--source", "history", "--url", server.queryURL])
            #expect(conflict.status == 64)
        }
    }

    @Test func snapshotFilesAreAcceptedByTheCLI() async throws {
        let check = try await runAmpel(["check", "--district", "09162", "--snapshot", RecordedRKI.url(day: "2020-10-15").path, "--json"])
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.contains("\"dataDate\":\"2020-10-15\""))
    }
}

// MARK: - Running the built binary

/// What one run of the binary produced.
private struct AmpelRun {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs the built `ampel` (located by ``AmpelBinary``) in English without colours.
private func runAmpel(_ arguments: [String]) async throws -> AmpelRun {
    var environment = ProcessInfo.processInfo.environment
    environment["NO_COLOR"] = "1"
    environment["LANG"] = "en_US.UTF-8"
    environment["LC_ALL"] = nil
    environment["LC_MESSAGES"] = nil
    let output = try await AmpelBinary.run(arguments, environment: environment)
    return AmpelRun(status: output.exitCode, stdout: output.stdoutText, stderr: output.stderrText)
}
