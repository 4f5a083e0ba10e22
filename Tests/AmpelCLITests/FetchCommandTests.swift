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
            let first = try await runAmpel(["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.contains("RKI data of 2020-11-05: 412 districts, 96 in Bayern"), "\(first.stdout)")
            let phaseLine = ["green", "yellow", "red", "darkred"].map { "\($0) \(counts[$0] ?? 0)" }.joined(separator: " · ")
            #expect(first.stdout.contains(phaseLine), "\(first.stdout) vs \(phaseLine)")
            #expect(server.requestCount == 3, "412 districts in pages of 200")
            #expect(server.requests.allSatisfy { $0.userAgent?.hasPrefix("ampel/") == true })
            let cached = try #require(try DatasetCache(directory: directory).load())
            #expect(cached.dataset.date == Day(iso: "2020-11-05"))
            #expect(cached.dataset.districts.count == 412)

            let again = try await runAmpel(["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path, "--json"])
            #expect(again.status == 0)
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
            #expect(summary["status"] as? String == "unchanged")
            #expect(summary["date"] as? String == "2020-11-05")
            #expect(summary["regionDistricts"] as? Int == 96)
            #expect(summary["phases"] as? [String: Int] == counts)

            // An older publication is rejected and the cache stays.
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-10-15"))
            let older = try await runAmpel(["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path])
            #expect(older.status == 3)
            #expect(older.stderr.contains("(outdated)"), "\(older.stderr)")
            #expect(try DatasetCache(directory: directory).load()?.dataset.date == Day(iso: "2020-11-05"))

            // A newer one is taken and reports the phase changes.
            try server.serve(contentsOf: RecordedRKI.url(day: "2020-11-23"))
            let newer = try await runAmpel(["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path, "--json"])
            #expect(newer.status == 0, "\(newer.stderr)")
            let update = try #require(try JSONSerialization.jsonObject(with: Data(newer.stdout.utf8)) as? [String: Any])
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
            let unreachable = try await runAmpel(["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path, "--retries", "0"])
            #expect(unreachable.status == 2)
            #expect(unreachable.stderr.contains("HTTP 500"), "\(unreachable.stderr)")

            server.inject(.arcgisError(code: 400, message: "Cannot perform query. Invalid query parameters."))
            let invalid = try await runAmpel(["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", directory.path])
            #expect(invalid.status == 3)
            #expect(invalid.stderr.contains("(api-error)"), "\(invalid.stderr)")
            #expect(invalid.stderr.contains("Invalid query parameters"))
            #expect(try DatasetCache(directory: directory).load() == nil, "nothing cached from bad answers")

            // A state directory that cannot be created: the data is fine, the cache is not.
            let blocker = directory.appendingPathComponent("file")
            try Data("x".utf8).write(to: blocker)
            let noCache = try await runAmpel(["fetch", "--source", "arcgis", "--url", server.queryURL, "--state-dir", blocker.appendingPathComponent("state").path])
            #expect(noCache.status == 4, "\(noCache.stderr)")
            #expect(noCache.stdout.contains("RKI data of 2020-11-05"))

            let usage = try await runAmpel(["fetch", "--timeout", "-1"])
            #expect(usage.status == 64)
            let badURL = try await runAmpel(["fetch", "--source", "arcgis", "--url", "ftp://127.0.0.1/query", "--state-dir", directory.path])
            #expect(badURL.status == 64)
            #expect(badURL.stderr.contains("http(s) URL"))
        }
    }
}
