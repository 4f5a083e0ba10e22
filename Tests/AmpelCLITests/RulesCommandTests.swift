import AmpelTestSupport
import Foundation
import Testing

/// `ampel rules`: the rule set's bounds and texts, and a broken rule-set file.
@Suite struct RulesCommandTests {
    @Test func rulesShowsBoundsAndTexts() async throws {
        let out = try await AmpelBinary.run(["rules", "--json", "--lang", "en"])
        let object = try #require(JSONSerialization.jsonObject(with: out.stdout) as? [String: Any])
        let phases = try #require(object["phases"] as? [[String: Any]])
        #expect(phases.compactMap { $0["id"] as? String } == ["green", "yellow", "red", "darkred"])
        #expect(phases[1]["lower"] as? Double == 35)
        #expect(phases[1]["lowerInclusive"] as? Bool == true)
        #expect(phases[2]["upper"] as? Double == 100)
        let initial = try await AmpelBinary.run(["rules", "--rules", "bavaria-initial", "--json"])
        let initialPhases = try #require((JSONSerialization.jsonObject(with: initial.stdout) as? [String: Any])?["phases"] as? [[String: Any]])
        #expect(initialPhases.count == 3)
    }

    @Test func aBrokenRuleSetFileIsRejectedWithItsReason() async throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("rules-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data(##"{"id":"x","name":{"de":"x","en":"x"},"languages":["de","en"],"phases":[{"id":"green","color":"#00FF00","lower":null,"upper":{"value":35,"inclusive":true}},{"id":"yellow","color":"#FFFF00","lower":{"value":35,"inclusive":true},"upper":null}],"always":{"de":["a"],"en":["a"]},"outside":{"color":"#808080","title":{"de":"a","en":"a"},"rules":{"de":[],"en":[]}}}"##.utf8).write(to: url)
        let out = try await AmpelBinary.run(["rules", "--rules", url.path])
        #expect(out.exitCode != 0)
        #expect(out.stderrText.contains("rule set"))
    }
}
