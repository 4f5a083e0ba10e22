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
        #expect(try ruleSet.classify(incidence).id.id == expected)
    }

    @Test(arguments: [
        (0.0, "green"), (34.999, "green"), (35, "yellow"), (50, "yellow"), (50.0001, "red"),
        (100, "red"), (100.0001, "red"), (1651, "red"),
    ])
    func initialBoundsHaveNoDarkRed(incidence: Double, expected: String) throws {
        let ruleSet = try RuleSetCatalog.bundled("bavaria-initial")
        #expect(try ruleSet.classify(incidence).id.id == expected)
    }

    /// DARK RED is a data change: both sets classify through the same `Classifier` type,
    /// and they differ only in the red band's upper bound and the extra phase.
    @Test func threeAndFourPhaseSetsShareTheCode() throws {
        let initial = try RuleSetCatalog.bundled("bavaria-initial")
        let full = try RuleSetCatalog.bundled("bavaria")
        #expect(initial.classifier.phases == [.green, .yellow, .red])
        #expect(full.classifier.phases == [.green, .yellow, .red, .darkred])
        for incidence in stride(from: 0.0, through: 100.0, by: 0.25) {
            #expect(try initial.classify(incidence).id == full.classify(incidence).id)
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
            #expect(ruleSet.always(.de).count == 4)
            #expect(ruleSet.always(.en).count == 4)
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
