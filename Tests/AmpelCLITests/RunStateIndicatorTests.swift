import AmpelTestSupport
import Foundation
import Testing

/// `ampel run --rules krankenhausampel-2021 --source rki` end to end: a real mosquitto, the
/// built binary, and a loopback server serving the RKI's hospitalisation and intensive-care
/// files cut from the real ones (shared/) at a day.
@Suite struct RunStateIndicatorTests {
    static let munich = (48.137, 11.575)
    static let hospitalPath = "/Aktuell_Deutschland_adjustierte-COVID-19-Hospitalisierungen.csv"
    static let icuPath = "/Intensivregister_Bundeslaender_Kapazitaeten.csv"

    static func raw(_ path: String) throws -> [Substring] {
        let url = RKIDistrictFile.sharedDataDirectory().appendingPathComponent("rki-github").appendingPathComponent(path)
        return try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
    }

    /// The register's state file as published on `day`: its header and every row up to that day.
    static func icuFile(through day: String) throws -> Data {
        let lines = try raw("intensivregister/Intensivregister_Bundeslaender_Kapazitaeten.csv")
        return Data((lines.prefix(1) + lines.dropFirst().filter { $0.prefix(10) <= day }).joined(separator: "\n").utf8 + [10])
    }

    /// The hospitalisation file with its real header and, for each day from `first` to `last`,
    /// a `00+` row per region whose fixed values are `NA`: the file's own "no value", as the
    /// fixed values begin only in 2023.
    static func hospitalFileWithoutValues(from first: Int, to last: Int) throws -> Data {
        let header = try raw("hospitalisierungen/Aktuell_Deutschland_adjustierte-COVID-19-Hospitalisierungen.csv")[0]
        var lines = [String(header)]
        for day in (first...last).reversed() {
            for state in 0...16 {
                let id = state < 10 ? "0\(state)" : "\(state)"
                lines.append("2021-11-\(day < 10 ? "0" : "")\(day),Land,\(id),00+,NA,NA,NA,NA,NA,1000000,NA,NA,NA,NA,NA")
            }
        }
        return Data((lines.joined(separator: "\n") + "\n").utf8)
    }

    @Test("Bavaria turns red on 8 November 2021: a 304 per unchanged check, the phone alerted once with the decisive indicator, a broken file refused while the data in force stays")
    func krankenhausampelTurnsRed() async throws {
        var options = Scene.Options()
        options.source = "rki"
        options.date = nil
        options.http = true
        options.topics = ["ampel/district/09162/#", "ampel/device/#", "ampel/bridge/info"]
        options.arguments = ["--rules", "krankenhausampel-2021", "--refresh", "1"]
        options.configuration = "data:\n  hospitalisation_url: {http}\(Self.hospitalPath)\n  icu_url: {http}\(Self.icuPath)\n"
        try await Scene.run(options) { scene in
            let server = try #require(scene.server)
            server.serveFile(try Self.hospitalFileWithoutValues(from: 1, to: 7), at: Self.hospitalPath)
            server.serveFile(try Self.icuFile(through: "2021-11-07"), at: Self.icuPath)
            try await scene.start()
            // 7 November: 591 patients in Bavarian intensive care, above 450 (in force since the 6th): yellow.
            try await scene.collector.wait("München yellow on 2021-11-07") { records in
                records.contains { $0.topic == "ampel/district/09162/phase" && $0.payload == "yellow" }
            }
            let tst = Int(Date().timeIntervalSince1970)
            try await scene.fix("alice/phone", at: Self.munich, tst: tst, input: .owntracks)
            try await scene.collector.wait("alice's yellow state") { records in
                records.contains { $0.topic == "ampel/device/alice/phone/state" && Scene.Collector.field("phase", $0.payload) as? String == "yellow" }
            }
            try await scene.collector.wait("a bridge/info after a 304") { records in
                records.contains { record in
                    guard record.topic == "ampel/bridge/info", let counters = Scene.Collector.field("counters", record.payload) as? [String: Any] else { return false }
                    return (counters["dataNotModified"] as? Int ?? 0) >= 1
                }
            }
            #expect(server.fileOKCount(at: Self.icuPath) == 1 && server.fileOKCount(at: Self.hospitalPath) == 1, "each file downloaded once")
            #expect(server.fileNotModifiedCount(at: Self.icuPath) >= 1 && server.fileNotModifiedCount(at: Self.hospitalPath) >= 1)

            // A broken hospitalisation file (a renamed column) is refused; yellow stays in force.
            var mark = scene.collector.mark
            let broken = String(decoding: try Self.hospitalFileWithoutValues(from: 1, to: 8), as: UTF8.self)
                .replacingOccurrences(of: "fixierte_7T_Hospitalisierung_Faelle", with: "fixierte_7T_Hospitalisierung_Anzahl")
            server.serveFile(Data(broken.utf8), at: Self.hospitalPath)
            server.serveFile(try Self.icuFile(through: "2021-11-08"), at: Self.icuPath)
            try await scene.collector.wait("the refusal in bridge/info", since: mark) { records in
                records.contains { $0.topic == "ampel/bridge/info"
                    && (Scene.Collector.field("lastError", $0.payload) as? String)?.contains("fixierte_7T_Hospitalisierung_Faelle") == true }
            }
            #expect(!scene.collector.records(since: mark).contains { $0.topic == "ampel/district/09162/phase" }, "the data in force stays")
            #expect(scene.collector.alerts()["alice/phone"] == ["null>yellow"])

            // The RKI publishes 8 November: 608 patients, red; the phone is told once, with why.
            mark = scene.collector.mark
            server.serveFile(try Self.hospitalFileWithoutValues(from: 1, to: 8), at: Self.hospitalPath)
            try await scene.collector.wait("alice's alert yellow -> red", since: mark) { records in
                records.contains { $0.topic == "ampel/device/alice/phone/alert" && $0.payload.contains("\"red\"") }
            }
            try await scene.collector.wait("München red", since: mark) { records in
                records.contains { $0.topic == "ampel/district/09162/phase" && $0.payload == "red" }
            }
            let alert = try #require(scene.collector.records(since: mark).last { $0.topic == "ampel/device/alice/phone/alert" })
            let payload = try #require(JSONSerialization.jsonObject(with: Data(alert.payload.utf8)) as? [String: Any])
            #expect(payload["reason"] as? String == "Red: 608 COVID-19 patients in intensive care in Bayern, above 600")
            let indicators = try #require(payload["indicators"] as? [[String: Any]])
            let decisive = indicators.filter { $0["decisive"] as? Bool == true }
            #expect(decisive.count == 1 && decisive[0]["name"] as? String == "icu_covid_patients" && decisive[0]["value"] as? Double == 608
                    && decisive[0]["date"] as? String == "2021-11-08")
            // Checks after the change find both files unchanged: no second alert.
            let checks = server.fileNotModifiedCount(at: Self.icuPath)
            try await scene.collector.wait("two more checks", since: mark) { _ in server.fileNotModifiedCount(at: Self.icuPath) >= checks + 2 }
            #expect(scene.collector.alerts()["alice/phone"] == ["null>yellow", "yellow>red"])
            let info = try await scene.retainedInfo()
            #expect(info["dataDate"] as? String == "2021-11-08")
            #expect(info["lastError"] is NSNull)
        }
    }

    @Test("a fresh install whose files cannot be had starts on the bundled hospital data, and says why")
    func freshInstallStartsOnTheBundledIndicators() async throws {
        var options = Scene.Options()
        options.source = "rki"
        options.date = nil
        options.http = true
        options.topics = ["ampel/district/09162/#", "ampel/bridge/info"]
        options.arguments = ["--rules", "krankenhausampel-2021"]
        options.configuration = "data:\n  hospitalisation_url: {http}\(Self.hospitalPath)\n  icu_url: {http}\(Self.icuPath)\n"
        try await Scene.run(options) { scene in
            try await scene.start()
            // Nothing is served (404): the bundled files of 2026-08-22, green, until the RKI answers.
            try await scene.collector.wait("München's phase from the bundled data") { records in
                records.contains { $0.topic == "ampel/district/09162/phase" && $0.payload == "green" }
            }
            try await scene.collector.wait("the 404 in bridge/info") { records in
                records.contains { $0.topic == "ampel/bridge/info" && (Scene.Collector.field("lastError", $0.payload) as? String)?.contains("404") == true }
            }
            let info = try await scene.retainedInfo()
            #expect(info["dataDate"] as? String == "2026-08-22")
        }
    }
}
