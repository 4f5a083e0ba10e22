import Foundation

/// The 400 German districts as the RKI's maintained dataset keys them (`Landkreis_id`), with
/// the names Ampel shows: what a source that carries only codes (the district CSV) is
/// joined with, and what a region's completeness is checked against.
///
/// Read once from the bundled `districts/germany_districts.csv` (made by
/// `tools/make_district_table.py` from BKG VG1000 and the RKI's own names).
public struct DistrictDirectory: Sendable {
    /// Every district by code; `population` is `nil` (the data carries it).
    public let byCode: [String: District]
    /// The codes, ascending.
    public let codes: [String]

    public init(_ districts: [District]) {
        byCode = Dictionary(districts.map { ($0.ags, $0) }, uniquingKeysWith: { first, _ in first })
        codes = byCode.keys.sorted()
    }

    public subscript(ags: String) -> District? { byCode[ags] }

    /// The districts of `region`, by code.
    public func districts(in region: Region) -> [District] {
        codes.filter { region.contains(ags: $0) }.compactMap { byCode[$0] }
    }

    /// The bundled directory of Germany.
    public static let germany: DistrictDirectory = {
        guard let url = Bundle.module.url(forResource: "germany_districts", withExtension: "csv", subdirectory: "districts"),
              let data = try? Data(contentsOf: url), let text = String(data: data, encoding: .utf8)
        else { fatalError("the bundled district table is missing: a build defect") }
        var districts: [District] = []
        for line in text.split(separator: "\n").dropFirst() {
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard f.count == 5, District.isValidCode(f[0]), let kind = District.Kind(rawValue: f[3]) else {
                fatalError("the bundled district table has a bad line '\(line)': a build defect")
            }
            districts.append(District(ags: f[0], name: f[1], shortName: f[2], kind: kind, state: f[4], population: nil))
        }
        return DistrictDirectory(districts)
    }()
}
