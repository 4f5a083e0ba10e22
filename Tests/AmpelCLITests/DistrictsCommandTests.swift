import AmpelTestSupport
import Foundation
import Testing

/// `ampel districts`: every Bavarian district with its signal, sorted.
@Suite struct DistrictsCommandTests {
    @Test func districtsListsAllBavarianDistrictsSortedByIncidence() async throws {
        let out = try await AmpelBinary.run(["districts", "--date", "2020-10-15", "--json"])
        #expect(out.exitCode == 0)
        let rows = try #require(JSONSerialization.jsonObject(with: out.stdout) as? [[String: Any]])
        #expect(rows.count == 96)
        let incidences = rows.compactMap { $0["incidence"] as? Double }
        #expect(incidences == incidences.sorted(by: >))
        #expect(Set(rows.compactMap { $0["phase"] as? String }).count >= 3)
        let byName = try await AmpelBinary.run(["districts", "--date", "2020-10-15", "--sort", "name", "--json"])
        let names = try #require(JSONSerialization.jsonObject(with: byName.stdout) as? [[String: Any]]).compactMap { $0["name"] as? String }
        #expect(names == names.sorted { $0.lowercased() < $1.lowercased() })
    }
}
