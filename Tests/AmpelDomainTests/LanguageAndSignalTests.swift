import AmpelCore
import AmpelDomain
import Foundation
import Testing

@Suite struct LanguageTests {
    @Test(arguments: [
        ("de", Language.de), ("en", .en), ("de_DE.UTF-8", .de), ("de-AT", .de), ("en_GB.UTF-8", .en),
        ("fr", .en), ("fr_FR.UTF-8", .en), ("C", .en), ("POSIX", .en), ("", .en), ("DE", .de),
    ])
    func requestedLanguageFallsBackToEnglish(requested: String, expected: Language) {
        #expect(Language(requested: requested) == expected)
    }

    @Test func environmentPrecedence() {
        #expect(Language(environment: ["LANG": "de_DE.UTF-8"]) == .de)
        #expect(Language(environment: ["LANG": "de_DE.UTF-8", "LC_ALL": "en_US.UTF-8"]) == .en)
        #expect(Language(environment: ["LANG": "en_US.UTF-8", "LC_MESSAGES": "de_DE.UTF-8"]) == .de)
        #expect(Language(environment: ["LC_ALL": "", "LANG": "de_DE"]) == .de)
        #expect(Language(environment: [:]) == .en)
    }

    @Test func textsFallBackToEnglish() {
        let text = LocalizedText([.en: "Green"])
        #expect(text(.de) == "Green")
        let list = LocalizedList([.en: ["a"], .de: ["b"]])
        #expect(list(.de) == ["b"])
        #expect(list(Language(requested: "it")) == ["a"])
    }
}

@Suite struct DayTests {
    @Test func parsesAndFormats() throws {
        #expect(Day(iso: "2020-11-05")?.iso == "2020-11-05")
        #expect(Day(rkiLastUpdate: "05.11.2020, 00:00 Uhr") == Day(iso: "2020-11-05"))
        for bad in ["2020-13-01", "2020-02-30", "2021-02-29", "20-11-05", "2020-1-5", "x", "2020-11-05T00"] {
            #expect(Day(iso: bad) == nil, "\(bad)")
        }
        #expect(Day(iso: "2020-02-29") != nil)
        #expect(Day(rkiLastUpdate: "5.11.20") == nil)
    }

    @Test func epochRoundTrip() throws {
        #expect(try #require(Day(iso: "1970-01-01")).daysSinceEpoch == 0)
        #expect(try #require(Day(iso: "2020-11-05")).daysSinceEpoch == 18571)
        for offset in stride(from: -1000, through: 30000, by: 37) {
            #expect(Day(daysSinceEpoch: offset).daysSinceEpoch == offset)
        }
    }
}

@Suite struct SignalTests {
    let munich = District(ags: "09162", name: "SK München", shortName: "München", kind: .city, state: "Bayern", population: 1_484_226)

    @Test func signalCarriesTheContract() throws {
        let ruleSet = try RuleSetCatalog.bundled("bavaria")
        let day = try #require(Day(iso: "2020-11-05"))
        let signal = try ruleSet.signal(for: DistrictIncidence(district: munich, incidence: 42, stateIncidence: nil), dataDate: day, language: .de)
        #expect(signal.phase == "yellow")
        #expect(signal.color == ruleSet.rules(for: .yellow)?.color.hex)
        #expect(signal.title.hasPrefix("Gelb"))
        let object = try JSONSerialization.jsonObject(with: Data(signal.json())) as! [String: Any]
        #expect(Set(object.keys) == ["district", "incidence", "phase", "color", "dataDate", "ruleSet", "lang", "title", "rules", "always", "stale",
                                   "measuredPhase", "since", "trend", "complete", "indicators", "reason"])
        #expect(object["measuredPhase"] as? String == "yellow")
        #expect(object["since"] is NSNull, "no history: no since")
        #expect(object["trend"] is NSNull, "no history: no trend")
        let district = object["district"] as! [String: Any]
        #expect(district["ags"] as? String == "09162")
        #expect(district["name"] as? String == "SK München")
        #expect(district["state"] as? String == "Bayern")
        #expect(object["dataDate"] as? String == "2020-11-05")
        #expect(object["lang"] as? String == "de")
        #expect((object["always"] as? [String])?.count == 4)
    }

    @Test func invalidIncidenceGivesNoSignal() throws {
        let ruleSet = try RuleSetCatalog.bundled("bavaria")
        let day = try #require(Day(iso: "2020-11-05"))
        for bad in [Double.nan, .infinity, -1] {
            #expect(throws: SignalError.self) {
                try ruleSet.signal(for: DistrictIncidence(district: munich, incidence: bad, stateIncidence: nil), dataDate: day, language: .en)
            }
        }
    }

    @Test func outsideSignalHasNullDistrictAndIncidence() throws {
        let ruleSet = try RuleSetCatalog.bundled("bavaria")
        let signal = ruleSet.outsideSignal(district: nil, dataDate: try #require(Day(iso: "2020-11-05")), language: .en)
        let text = String(decoding: signal.json(), as: UTF8.self)
        #expect(text.contains("\"district\":null"))
        #expect(text.contains("\"incidence\":null"))
        #expect(text.contains("\"phase\":\"outside\""))
    }
}
