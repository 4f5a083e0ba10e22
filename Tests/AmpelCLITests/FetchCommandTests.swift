import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Testing

/// `ampel fetch`: the built binary against the loopback RKI server, its cache and its exit codes.
@Suite struct FetchCommandTests {
    @Test func fetchValidatesCachesAndSummarises() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let raw = try rawBavarianIncidences(day: "2020-11-05")
        var counts: [String: Int] = ["green": 0, "yellow": 0, "red": 0, "darkred": 0]
        for incidence in raw.values { counts[expectedPhase(incidence), default: 0] += 1 }

        try await withServer(serving: "2020-11-05", maxRecordCount: 200) { server in
            let first = try await AmpelBinary.run(plain: ["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path])
            #expect(first.exitCode == 0, "\(first.stderrText)")
            #expect(first.stdoutText.contains("RKI data of 2020-11-05: 412 districts, 96 in Bayern"), "\(first.stdoutText)")
            let phaseLine = ["green", "yellow", "red", "darkred"].map { "\($0) \(counts[$0] ?? 0)" }.joined(separator: " · ")
            #expect(first.stdoutText.contains(phaseLine), "\(first.stdoutText) vs \(phaseLine)")
            #expect(server.requestCount == 3, "412 districts in pages of 200")
            #expect(server.requests.allSatisfy { $0.userAgent?.hasPrefix("ampel/") == true })
            let cached = try #require(try DatasetCache(directory: directory).load())
            #expect(cached.dataset.date == Day(iso: "2020-11-05"))
            #expect(cached.dataset.districts.count == 412)

            let again = try await AmpelBinary.run(plain: ["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path, "--json"])
            #expect(again.exitCode == 0)
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(again.stdoutText.utf8)) as? [String: Any])
            #expect(summary["status"] as? String == "unchanged")
            #expect(summary["date"] as? String == "2020-11-05")
            #expect(summary["regionDistricts"] as? Int == 96)
            #expect(summary["phases"] as? [String: Int] == counts)

            // An older publication is rejected and the cache stays.
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-10-15"))
            let older = try await AmpelBinary.run(plain: ["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path])
            #expect(older.exitCode == 3)
            #expect(older.stderrText.contains("(outdated)"), "\(older.stderrText)")
            #expect(try DatasetCache(directory: directory).load()?.dataset.date == Day(iso: "2020-11-05"))

            // A newer one is taken and reports the phase changes.
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-11-23"))
            let newer = try await AmpelBinary.run(plain: ["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path, "--json"])
            #expect(newer.exitCode == 0, "\(newer.stderrText)")
            let update = try #require(try JSONSerialization.jsonObject(with: Data(newer.stdoutText.utf8)) as? [String: Any])
            #expect(update["status"] as? String == "updated")
            let after = try rawBavarianIncidences(day: "2020-11-23")
            let expected = raw.keys.filter { expectedPhase(raw[$0]!) != expectedPhase(after[$0]!) }.sorted()
            #expect(update["changedDistricts"] as? [String] == expected)
            #expect(try DatasetCache(directory: directory).load()?.dataset.date == Day(iso: "2020-11-23"))
        }
    }

    @Test func fetchExitCodesForBadAnswers() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withServer(serving: "2020-11-05") { server in
            server.inject(.status(500), times: 1)
            let unreachable = try await AmpelBinary.run(plain: ["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path, "--retries", "0"])
            #expect(unreachable.exitCode == 2)
            #expect(unreachable.stderrText.contains("HTTP 500"), "\(unreachable.stderrText)")

            server.inject(.arcgisError(code: 400, message: "Cannot perform query. Invalid query parameters."))
            let invalid = try await AmpelBinary.run(plain: ["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path])
            #expect(invalid.exitCode == 3)
            #expect(invalid.stderrText.contains("(api-error)"), "\(invalid.stderrText)")
            #expect(invalid.stderrText.contains("Invalid query parameters"))
            #expect(try DatasetCache(directory: directory).load() == nil, "nothing cached from bad answers")

            // A state directory that cannot be created: the data is fine, the cache is not.
            let blocker = directory.appendingPathComponent("file")
            try Data("x".utf8).write(to: blocker)
            let noCache = try await AmpelBinary.run(plain: ["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", blocker.appendingPathComponent("state").path])
            #expect(noCache.exitCode == 4, "\(noCache.stderrText)")
            #expect(noCache.stdoutText.contains("RKI data of 2020-11-05"))

            let usage = try await AmpelBinary.run(plain: ["fetch", "--timeout", "-1"])
            #expect(usage.exitCode == 64)
            let badURL = try await AmpelBinary.run(plain: ["fetch", "--source", "arcgis", "--url", "ftp://127.0.0.1/query", "--state-dir", directory.path])
            #expect(badURL.exitCode == 64)
            #expect(badURL.stderrText.contains("http(s) URL"))
        }
    }
}
