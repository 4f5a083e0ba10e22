import AmpelCore
import AmpelDomain
import Foundation
import Testing

@Suite struct RuleSetTests {
    @Test(arguments: [
        (0.0, "green"), (34.999, "green"), (35, "yellow"), (50, "yellow"), (50.0001, "red"),
        (100, "red"), (100.0001, "darkred"), (1651, "darkred"),
    ])
    func bavariaBounds(incidence: Double, expected: String) throws {
        let ruleSet = try RuleSetCatalog.bundled("bavaria")
        #expect(try ruleSet.classify(incidence)?.id.id == expected)
    }

    @Test(arguments: [
        (0.0, "green"), (34.999, "green"), (35, "yellow"), (50, "yellow"), (50.0001, "red"),
        (100, "red"), (100.0001, "red"), (1651, "red"),
    ])
    func initialBoundsHaveNoDarkRed(incidence: Double, expected: String) throws {
        let ruleSet = try RuleSetCatalog.bundled("bavaria-initial")
        #expect(try ruleSet.classify(incidence)?.id.id == expected)
    }

    /// DARK RED is a data change: both sets classify through the same `Classifier` type,
    /// and they differ only in the red band's upper bound and the extra phase.
    @Test func threeAndFourPhaseSetsShareTheCode() throws {
        let initial = try RuleSetCatalog.bundled("bavaria-initial")
        let full = try RuleSetCatalog.bundled("bavaria")
        #expect(initial.classifier?.phases == [.green, .yellow, .red])
        #expect(full.classifier?.phases == [.green, .yellow, .red, .darkred])
        for incidence in stride(from: 0.0, through: 100.0, by: 0.25) {
            #expect(try initial.classify(incidence)?.id == full.classify(incidence)?.id)
        }
        // Rebuilding the four-phase set from the three-phase file by adding data gives the same classifier.
        var file = try JSONSerialization.jsonObject(with: bundledData("bavaria-initial")) as! [String: Any]
        let fullFile = try JSONSerialization.jsonObject(with: bundledData("bavaria")) as! [String: Any]
        file["phases"] = fullFile["phases"]
        let rebuilt = try RuleSet.decode(JSONSerialization.data(withJSONObject: file), name: "rebuilt")
        #expect(rebuilt.classifier == full.classifier)
    }

    @Test func everyTextExistsInBothLanguagesAndDiffers() throws {
        for name in RuleSetCatalog.bundledNames {
            let ruleSet = try RuleSetCatalog.bundled(name)
            #expect(ruleSet.languages == [.de, .en])
            for phase in ruleSet.phases {
                #expect(phase.title(.de) != phase.title(.en))
                #expect(phase.rules(.de).count == phase.rules(.en).count)
                #expect(!phase.rules(.de).isEmpty)
            }
            // The incidence sets' four basic rules; the later sets' own.
            #expect(ruleSet.always(.de).count == (ruleSet.readsStateIndicators ? ruleSet.always(.en).count : 4))
            #expect(ruleSet.always(.en).count >= 4)
        }
    }

    @Test func redUsesTheRegulationsContactLimit() throws {
        let red = try #require(RuleSetCatalog.bundled("bavaria").rules(for: .red))
        #expect(red.rules(.de).contains { $0.contains("zwei Hausstände oder fünf Personen") })
        #expect(red.rules(.en).contains { $0.contains("two households or five people") })
    }

    @Test func coloursAreDistinct() throws {
        let ruleSet = try RuleSetCatalog.bundled("bavaria")
        #expect(Set(ruleSet.phases.map(\.color)).count == 4)
        #expect(!ruleSet.phases.map(\.color).contains(ruleSet.outside.color))
    }

    // MARK: validation

    func mutated(_ change: (inout [String: Any]) -> Void) throws -> Data {
        var file = try JSONSerialization.jsonObject(with: bundledData("bavaria")) as! [String: Any]
        change(&file)
        return try JSONSerialization.data(withJSONObject: file)
    }

    func phase(_ file: inout [String: Any], _ index: Int, _ change: (inout [String: Any]) -> Void) {
        var phases = file["phases"] as! [[String: Any]]
        change(&phases[index])
        file["phases"] = phases
    }

    func rejected(_ data: Data) -> String? {
        do {
            _ = try RuleSet.decode(data, name: "test")
            return nil
        } catch {
            return error.message
        }
    }

    @Test func overlappingBoundsAreRejected() throws {
        let data = try mutated { file in phase(&file, 1) { $0["lower"] = ["value": 30, "inclusive": true] } }
        #expect(rejected(data)?.contains("overlap") == true)
    }

    @Test func gappedBoundsAreRejected() throws {
        let data = try mutated { file in phase(&file, 2) { $0["lower"] = ["value": 60, "inclusive": false] } }
        #expect(rejected(data)?.contains("gap") == true)
    }

    @Test func missingTextInADeclaredLanguageIsRejected() throws {
        let data = try mutated { file in phase(&file, 0) { $0["title"] = ["de": "Grün"] } }
        #expect(rejected(data)?.contains("no text in declared language 'en'") == true)
        let rules = try mutated { file in phase(&file, 3) { $0["rules"] = ["en": ["x"]] } }
        #expect(rejected(rules)?.contains("'de'") == true)
    }

    @Test func badColourIsRejected() throws {
        let data = try mutated { file in phase(&file, 2) { $0["color"] = "red" } }
        #expect(rejected(data)?.contains("bad colour 'red'") == true)
    }

    @Test func unknownPhaseIdIsRejected() throws {
        let data = try mutated { file in phase(&file, 3) { $0["id"] = "purple" } }
        #expect(rejected(data)?.contains("unknown phase id 'purple'") == true)
    }

    @Test func notJSONIsRejected() {
        #expect(rejected(Data("phases: []".utf8))?.contains("not a valid rule-set file") == true)
        #expect(rejected(Data("{}".utf8))?.contains("missing key") == true)
    }

    @Test func theUnmodifiedFileIsAccepted() throws {
        #expect(rejected(try mutated { _ in }) == nil)
    }
}

func bundledData(_ name: String) throws -> Data {
    // The test reads the same resource the module ships.
    let url = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/AmpelDomain/Resources/rulesets/\(name).json")
    return try Data(contentsOf: url)
}

@Suite struct DayCountTests {
    static func days(from start: String, _ values: [Double]) -> [(day: Day, value: Double)] {
        let first = Day(iso: start)!
        return values.enumerated().map { (first.adding(days: $0.offset), $0.element) }
    }

    /// `bavaria`'s bounds with the Notbremse's counts: 3 days to enter, 5 working days to leave, 2 days' delay.
    static func countingBavaria() throws -> RuleSet {
        var file = try JSONSerialization.jsonObject(with: bundledData("bavaria")) as! [String: Any]
        file["id"] = "bavaria-counting"
        file["enterAfterDays"] = 3
        file["leaveAfterDays"] = 5
        file["delayDays"] = 2
        file["workingDaysOnly"] = true
        return try RuleSet.decode(JSONSerialization.data(withJSONObject: file), name: "bavaria-counting")
    }

    static func changes(_ ruleSet: RuleSet, _ days: [(day: Day, value: Double)]) throws -> [Day] {
        let measured = try days.map { ($0.day, try #require(try ruleSet.classify($0.value)).id) }
        let walked = ruleSet.dayCounts.walk(measured)
        return zip(walked.dropFirst(), walked).compactMap { now, before in now.phase != before.phase ? now.since : nil }
    }

    /// A district hovering around 50 for a week: `bavaria` changes every day of it, a rule set
    /// that counts days once (red after three days above 50, and it stays).
    @Test func hoveringAroundFiftyChangesOnceWithDayCountsAndDailyWithout() throws {
        let series = Self.days(from: "2021-03-01", [45, 45, 45, 52, 53, 54, 51, 49, 51, 49, 51, 49, 51, 49])
        let daily = try Self.changes(RuleSetCatalog.bundled("bavaria"), series)
        let counted = try Self.changes(Self.countingBavaria(), series)
        let week = series[7...].map(\.day)
        #expect(week.allSatisfy(daily.contains), "bavaria changes on every day of the hovering week: \(daily)")
        #expect(daily.count == 8)
        #expect(counted == [Day(iso: "2021-03-08")!], "three days above 50 (4-6 March), in force two days later")
    }

    @Test func notbremseCountsWorkingDaysAndWaitsTwoDays() throws {
        let ruleSet = try RuleSetCatalog.bundled("notbremse-2021")
        // Below 100 from Monday 19th; from Thursday 22 April 2021 three days above 100 (22-24),
        // in force two days later, Monday 26th.
        let series = Self.days(from: "2021-04-19", [90, 95, 99, 101, 120, 130, 110, 105, 90, 80, 70, 60, 50, 40, 40, 40, 40, 40, 40])
        let measured = try series.map { ($0.day, try #require(try ruleSet.classify($0.value)).id) }
        let walked = ruleSet.dayCounts.walk(measured)
        func phase(_ iso: String) -> PhaseInForce { walked[series.firstIndex { $0.day == Day(iso: iso)! }!] }
        #expect(phase("2021-04-25").phase == .red)
        #expect(phase("2021-04-26").phase == .darkred)
        #expect(phase("2021-04-26").since == Day(iso: "2021-04-26"))
        // Below from Tue 27 Apr: 27, 28, 29, 30 Apr (4), Sat 1 May holiday, Sun 2 May, Mon 3 May (5) -> in force Wed 5 May.
        #expect(phase("2021-05-04").phase == .darkred)
        #expect(phase("2021-05-04").measured == .red)
        #expect(phase("2021-05-05").phase == .red)
        #expect(phase("2021-05-05").since == Day(iso: "2021-05-05"))
        #expect(!ruleSet.dayCounts.isWorkingDay(Day(iso: "2021-05-01")!))
        #expect(!ruleSet.dayCounts.isWorkingDay(Day(iso: "2021-05-02")!))
        #expect(ruleSet.dayCounts.isWorkingDay(Day(iso: "2021-05-08")!))
    }

    @Test(arguments: [
        ("enterAfterDays", 0, "enterAfterDays must be at least 1, got 0"),
        ("leaveAfterDays", -2, "leaveAfterDays must be at least 1, got -2"),
        ("delayDays", -1, "delayDays must not be negative, got -1"),
    ])
    func invalidCountsAreRejected(key: String, value: Int, message: String) throws {
        var file = try JSONSerialization.jsonObject(with: bundledData("bavaria")) as! [String: Any]
        file[key] = value
        #expect(throws: RuleSetError(ruleSet: "bavaria", message: message)) {
            try RuleSet.decode(JSONSerialization.data(withJSONObject: file), name: "x")
        }
    }

    @Test func bavariaSetsSwitchAtOnce() throws {
        for name in ["bavaria", "bavaria-initial"] {
            #expect(try RuleSetCatalog.bundled(name).dayCounts == .immediate)
        }
    }
}
