import AmpelCore
import AmpelData
import AmpelDomain
import Foundation
import Testing

@Suite struct BundledDataTests {
    let data = BundledData.shared

    @Test func snapshotsAreWholeGermany() throws {
        for day in BundledData.snapshotDays {
            let dataset = try data.snapshot(on: day)
            #expect(dataset.date == day)
            #expect(dataset.districts.count == 412)
            #expect(dataset.districts(in: .bavaria).count == 96)
        }
    }

    @Test func datasetForADayIsTheLatestPublicationOnOrBeforeIt() throws {
        #expect(try data.snapshot(on: Day(iso: "2020-11-04")).date == Day(iso: "2020-10-15"))
        #expect(try data.snapshot(on: Day(iso: "2020-11-05")).date == Day(iso: "2020-11-05"))
        #expect(try data.snapshot(on: Day(iso: "2021-06-01")).date == Day(iso: "2020-11-23"))
        #expect(try data.dataset(on: Day(iso: "2020-11-17")).date == Day(iso: "2020-11-05"))
        #expect(try data.dataset(on: Day(iso: "2020-11-18")).date == Day(iso: "2020-11-18"))
        #expect(try data.dataset(on: Day(iso: "2020-11-23")).source.hasPrefix("snapshot"), "a snapshot wins on a day with both")
        #expect(try data.dataset(on: Day(iso: "2021-03-07")).date == Day(iso: "2021-03-07"))
        #expect(try data.dataset().date == Day(iso: "2021-11-22"))
        #expect(try data.history().date == Day(iso: "2021-11-22"))
    }

    @Test func beforeTheFirstBundledDayIsAnError() {
        #expect(throws: DataError.self) { try data.dataset(on: Day(iso: "2020-10-14")) }
        #expect(throws: DataError.self) { try data.history(on: Day(iso: "2020-11-17")) }
    }

    @Test func historyHasEveryBavarianDistrictEveryDay() throws {
        #expect(data.historyDays.count == 370)
        let day = try data.history(on: Day(iso: "2020-12-09"))
        #expect(day.districts.count == 96)
        let munich = try #require(day["09162"])
        #expect(munich.district.name == "SK München")
        #expect(munich.district.population == 1_484_226)
        #expect(munich.stateIncidence != nil)
    }

    /// Every Bavarian district on 2020-11-05 gets the phase its incidence implies: read the
    /// unmodified RKI CSV export independently of the bundled JSON and classify by the
    /// bounds written out here.
    @Test func everyBavarianDistrictOn20201105GetsItsPhase() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/rki_landkreisdaten_2020-11-05.csv")
        var text = try String(contentsOf: url, encoding: .utf8)
        if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
        let lines = text.split(separator: "\n")
        let header = splitCSV(String(lines[0]))
        let rsColumn = try #require(header.firstIndex(of: "RS"))
        let incidenceColumn = try #require(header.firstIndex(of: "cases7_per_100k"))
        let dataset = try data.snapshot(on: Day(iso: "2020-11-05"))
        let ruleSet = try RuleSetCatalog.bundled("bavaria")
        var checked = 0
        var phases: Set<String> = []
        for line in lines.dropFirst() {
            let fields = splitCSV(String(line))
            let rs = fields[rsColumn]
            guard rs.hasPrefix("09") else { continue }
            let incidence = try #require(Double(fields[incidenceColumn]))
            let expected = incidence < 35 ? "green" : incidence <= 50 ? "yellow" : incidence <= 100 ? "red" : "darkred"
            let entry = try #require(dataset[rs])
            let signal = try ruleSet.signal(for: entry, dataDate: dataset.date, language: .en)
            #expect(signal.phase == expected, "\(rs) at \(incidence)")
            #expect(signal.incidence == incidence)
            phases.insert(signal.phase)
            checked += 1
        }
        #expect(checked == 96)
        #expect(phases.count >= 2, "the day has districts in several phases")
    }

    func splitCSV(_ line: String) -> [String] {
        var fields: [String] = []
        var current = ""
        var quoted = false
        for character in line {
            if character == "\"" { quoted.toggle() } else if character == "," && !quoted {
                fields.append(current)
                current = ""
            } else if character != "\r" { current.append(character) }
        }
        fields.append(current)
        return fields
    }
}

@Suite struct ArcGISDecoderTests {
    let decoder = ArcGISDecoder()

    func feature(_ rs: String, _ incidence: Any, lastUpdate: String = "05.11.2020, 00:00 Uhr") -> [String: Any] {
        ["attributes": ["RS": rs, "GEN": "X", "BEZ": "Landkreis", "county": "LK X", "EWZ": 1000, "BL": "Bayern",
                        "BL_ID": "9", "last_update": lastUpdate, "cases7_per_100k": incidence, "cases7_bl_per_100k": 10.0]]
    }

    func body(_ features: [[String: Any]]) throws -> Data {
        try JSONSerialization.data(withJSONObject: ["features": features])
    }

    @Test func errorBodyIsRejected() {
        let data = Data(#"{"error":{"code":400,"message":"Invalid query","details":[]}}"#.utf8)
        #expect { try decoder.decodePage(data) } throws: { ($0 as? DataError)?.reason == .apiError }
    }

    @Test func truncatedBodyIsRejected() throws {
        let full = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/AmpelData/Resources/rki/landkreisdaten_2020-11-05.json"))
        let half = full.prefix(full.count / 2)
        #expect { try decoder.decodePage(Data(half)) } throws: { ($0 as? DataError)?.reason == .malformed }
        #expect(try decoder.dataset(full, source: "t").districts.count == 412)
    }

    @Test func negativeIncidenceAndMissingFieldsAreRejected() throws {
        #expect { try decoder.decodePage(body([feature("09162", -3.0)])) } throws: { ($0 as? DataError)?.reason == .invalidValue }
        var missing = feature("09162", 3.0)
        var attributes = missing["attributes"] as! [String: Any]
        attributes.removeValue(forKey: "cases7_per_100k")
        missing["attributes"] = attributes
        #expect { try decoder.decodePage(body([missing])) } throws: { ($0 as? DataError)?.reason == .missingField }
        #expect { try decoder.decodePage(body([feature("9162", 3.0)])) } throws: { ($0 as? DataError)?.reason == .invalidValue }
    }

    @Test func duplicatesAndMissingDistrictsAreRejected() throws {
        let page = try decoder.decodePage(body([feature("09162", 3.0), feature("09162", 4.0)]))
        #expect { try decoder.dataset(from: [page], source: "t", minimumDistricts: 1) } throws: { ($0 as? DataError)?.reason == .duplicateDistrict }
        let small = try decoder.decodePage(body([feature("09162", 3.0)]))
        #expect { try decoder.dataset(from: [small], source: "t") } throws: { ($0 as? DataError)?.reason == .missingDistricts }
        #expect(try decoder.dataset(from: [small], source: "t", minimumDistricts: 1).districts.count == 1)
        let empty = try decoder.decodePage(body([]))
        #expect { try decoder.dataset(from: [empty], source: "t", minimumDistricts: 0) } throws: { ($0 as? DataError)?.reason == .empty }
    }

    @Test func mixedPublicationDaysAreRejected() throws {
        #expect {
            try decoder.decodePage(body([feature("09162", 3.0), feature("09161", 3.0, lastUpdate: "06.11.2020, 00:00 Uhr")]))
        } throws: { ($0 as? DataError)?.reason == .invalidValue }
    }
}
