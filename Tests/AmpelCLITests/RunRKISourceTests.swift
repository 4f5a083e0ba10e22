import AmpelTestSupport
import Foundation
import Testing

/// `ampel run --source rki --url <file>` end to end: a real mosquitto, the built binary, and a
/// loopback server serving the RKI's district file made from the bundled real values.
@Suite struct RunRKISourceTests {
    /// Bavaria's phases by the bounds of the `bavaria` rule set, written out here rather than
    /// taken from the code under test: green below 35, yellow 35 to 50, red above 50, dark red above 100.
    static func phase(_ incidence: Double) -> String {
        incidence < 35 ? "green" : incidence <= 50 ? "yellow" : incidence <= 100 ? "red" : "darkred"
    }

    static let munich = (48.137, 11.575)

    @Test("the 96 district phases of the newest day, a 304 per unchanged check, and a device's alert when the next day changes its district's phase")
    func liveFileEndToEnd() async throws {
        var options = Scene.Options()
        options.source = "rki"
        options.date = nil
        options.http = true
        options.topics = ["ampel/district/+/phase", "ampel/device/#", "ampel/bridge/info"]
        options.arguments = ["--refresh", "1"]
        try await Scene.run(options) { scene in
            let server = try #require(scene.server)
            // 2021-08-21: SK München 48.5 (yellow); 2021-08-22: 54.4 (red). All four phases occur.
            let first = try RKIDistrictFile(from: "2021-07-25", to: "2021-08-21")
            server.serveFile(first.render())
            try await scene.start()

            let bavarian = first.districtIDs.filter { $0.hasPrefix("09") }
            #expect(bavarian.count == 96)
            var expected: [String: String] = [:]
            for id in bavarian { expected[id] = Self.phase(try #require(first.incidence(day: "2021-08-21", id: id))) }
            #expect(Set(expected.values) == ["green", "yellow", "red", "darkred"])
            // A fresh install starts on the bundled stand-in; the file's phases follow within one check.
            let wanted = expected
            try await scene.collector.wait("the 96 district phases of 2021-08-21") { records in
                Self.districtPhases(Array(records)) == wanted
            }
            let phases = Self.districtPhases(scene.collector.records())
            #expect(!phases.keys.contains { !$0.hasPrefix("09") }, "only the rule set's region")

            // A phone in München: yellow.
            let tst = Int(Date().timeIntervalSince1970)
            try await scene.fix("alice/phone", at: Self.munich, tst: tst, input: .owntracks)
            try await scene.collector.wait("alice's yellow state") { records in
                records.contains { $0.topic == "ampel/device/alice/phone/state" && Scene.Collector.field("phase", $0.payload) as? String == "yellow" }
            }

            // Checks of the unchanged file cost a 304 each.
            try await scene.collector.wait("a bridge/info after a 304") { records in
                records.contains { record in
                    guard record.topic == "ampel/bridge/info", let counters = Scene.Collector.field("counters", record.payload) as? [String: Any] else { return false }
                    return (counters["dataNotModified"] as? Int ?? 0) >= 1
                }
            }
            #expect(server.fileNotModifiedCount >= 1)
            #expect(server.fileOKCount == 1, "the file was downloaded once")

            // The RKI publishes the next day: the district turns red and the phone is told.
            let mark = scene.collector.mark
            let next = try RKIDistrictFile(from: "2021-07-25", to: "2021-08-22")
            server.serveFile(next.render())
            try await scene.collector.wait("alice's alert yellow -> red", since: mark) { records in
                records.contains { $0.topic == "ampel/device/alice/phone/alert" && $0.payload.contains("\"red\"") }
            }
            try await scene.collector.wait("the district phases of 2021-08-22", since: mark) { records in
                records.contains { $0.topic == "ampel/district/09162/phase" && $0.payload == "red" }
            }
            #expect(scene.collector.alerts()["alice/phone"]?.last == "yellow>red")
            var newPhases = expected
            for id in bavarian { newPhases[id] = Self.phase(try #require(next.incidence(day: "2021-08-22", id: id))) }
            let nextExpected = newPhases
            let changed = Set(bavarian.filter { nextExpected[$0] != expected[$0] })
            try await scene.collector.wait("every changed district's new phase", since: mark) { records in
                let seen = Self.districtPhases(Array(records))
                return changed.allSatisfy { seen[$0] == nextExpected[$0] }
            }
            #expect(Self.districtPhases(scene.collector.records(since: mark)).keys.allSatisfy { changed.contains($0) },
                    "only the districts whose phase changed are published again")
            try await scene.collector.wait("bridge/info of 2021-08-22", since: mark) { records in
                records.contains { $0.topic == "ampel/bridge/info" && Scene.Collector.field("dataDate", $0.payload) as? String == "2021-08-22" }
            }
            let info = try await scene.retainedInfo()
            #expect(info["source"] as? String == "rki")
            #expect(info["dataDate"] as? String == "2021-08-22")
            #expect(info["lastCheck"] is String)
            #expect(info["held"] is NSNull)
        }
    }

    /// The newest phase per district code among `records`.
    static func districtPhases(_ records: [Scene.Collector.Record]) -> [String: String] {
        var phases: [String: String] = [:]
        for record in records where record.topic.hasPrefix("ampel/district/") && record.topic.hasSuffix("/phase") {
            phases[String(record.topic.dropFirst("ampel/district/".count).prefix(5))] = record.payload
        }
        return phases
    }
}

/// A Germany-wide rule set on the Germany-wide file: every district is in the region.
@Suite struct GermanyWideTests {
    static func file() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-landkreise-\(UUID().uuidString).csv")
        try RKIDistrictFile(from: "2021-07-25", to: "2021-08-21").write(to: url)
        return url
    }

    @Test("districts and check follow the rule set's region: 400 districts under notbremse-2021, Berlin outside under bavaria")
    func regionOfTheRuleSet() async throws {
        let url = try Self.file()
        defer { try? FileManager.default.removeItem(at: url) }
        let source = ["--source", "rki", "--url", url.absoluteString]
        let germany = try await AmpelBinary.run(["districts", "--rules", "notbremse-2021", "--json"] + source)
        #expect(germany.exitCode == 0, "\(String(decoding: germany.stderr, as: UTF8.self))")
        let rows = try #require(JSONSerialization.jsonObject(with: germany.stdout) as? [[String: Any]])
        #expect(rows.count == 400)
        let bavaria = try await AmpelBinary.run(["districts", "--json"] + source)
        #expect(try #require(JSONSerialization.jsonObject(with: bavaria.stdout) as? [[String: Any]]).count == 96)

        // Berlin, Alexanderplatz.
        let berlin = ["check", "--lat", "52.5219", "--lon", "13.4132", "--json"] + source
        let inGermany = try await AmpelBinary.run(berlin + ["--rules", "notbremse-2021"])
        let signal = try #require(JSONSerialization.jsonObject(with: inGermany.stdout) as? [String: Any])
        #expect((signal["district"] as? [String: Any])?["ags"] as? String == "11000")
        #expect(["red", "darkred"].contains(signal["phase"] as? String ?? ""), "\(signal)")
        let outside = try #require(JSONSerialization.jsonObject(with: try await AmpelBinary.run(berlin).stdout) as? [String: Any])
        #expect(outside["phase"] as? String == "outside")
    }

    @Test("the daemon with notbremse-2021 publishes all 400 district phases")
    func daemonPublishesGermany() async throws {
        var options = Scene.Options()
        options.source = "rki"
        options.date = nil
        options.http = true
        options.topics = ["ampel/district/+/phase"]
        options.arguments = ["--rules", "notbremse-2021"]
        try await Scene.run(options) { scene in
            let server = try #require(scene.server)
            server.serveFile(try RKIDistrictFile(from: "2021-07-25", to: "2021-08-21").render())
            try await scene.start()
            // The stand-in of 2020 comes first (Berlin in twelve Bezirke, Eisenach); its districts
            // the file does not have are emptied, the file's 400 stay.
            try await scene.collector.wait("400 district phases") { records in
                var phases: [String: String] = [:]
                for record in records where record.topic.hasPrefix("ampel/district/") { phases[record.topic] = record.payload }
                // `mosquitto_sub -v` prints an emptied topic's payload as `(null)`.
                let live = phases.filter { $0.value != "(null)" }
                return live.count == 400 && live["ampel/district/11000/phase"] != nil && live["ampel/district/11001/phase"] == nil
            }
            let retained = try await scene.retained(["ampel/district/11000/phase"], count: 1)
            #expect(["red", "darkred"].contains(retained.first?.payload ?? ""))
        }
    }
}
