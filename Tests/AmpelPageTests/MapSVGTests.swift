import AmpelCore
import AmpelData
import AmpelDomain
import AmpelGeo
import AmpelPage
import Foundation
import Testing

@Suite("The map of Bavaria: 96 paths from the bundled geometry, filled by phase")
struct MapSVGTests {
    @Test("the map has the 96 Bavarian districts of the bundled index, each once, by AGS")
    func everyDistrictOnce() throws {
        let shapes = try MapShapes.bundled()
        let index = try DistrictIndex.bundled()
        let expected = index.districts(in: .bavaria).map(\.ags).sorted()
        #expect(expected.count == 96)
        #expect(shapes.shapes.map(\.ags) == expected)
        #expect(shapes.shapes.allSatisfy { !$0.path.isEmpty && $0.vertices >= 3 })
    }

    @Test("the fills are the rule set's colours of the phases a dataset gives (2020-10-15 and 2020-11-05)", arguments: ["2020-10-15", "2020-11-05"])
    func fillsFollowTheData(day: String) throws {
        let dataset = try BundledData.shared.snapshot(on: Day(iso: day))
        let ruleSet = RuleSetCatalog.standard()
        let districts = try statuses(dataset, ruleSet: ruleSet)
        let svg = MapSVG.render(shapes: try MapShapes.bundled(), districts: districts,
                                data: PageDataStatus(dataDate: day, source: "snapshot", stale: false), text: PageText(.en))
        let paths = try mapPaths(svg)
        #expect(paths.count == 96)
        var phasesSeen = Set<String>()
        for path in paths {
            let ags = try #require(path["data-ags"])
            let status = try #require(districts[ags], "the dataset lacks \(ags)")
            #expect(path["fill"] == status.color?.hex, "fill of \(ags)")
            #expect(path["data-phase"] == status.phase.id)
            phasesSeen.insert(status.phase.id)
        }
        // The day is worth checking only if it colours the map with more than one phase.
        #expect(phasesSeen.count >= 2)
    }

    @Test("districts outside the region are the rule set's outside grey, unknown ones the no-data grey")
    func outsideAndNoData() throws {
        let ruleSet = RuleSetCatalog.standard()
        // Oberbayern only (AGS 091…): the other six Regierungsbezirke are outside.
        let districts = try statuses(try BundledData.shared.snapshot(on: Day(iso: "2020-10-15")), ruleSet: ruleSet, region: Region(prefix: "091", name: "Oberbayern"))
            .filter { $0.key != "09162" }
        let paths = try mapPaths(MapSVG.render(shapes: try MapShapes.bundled(), districts: districts,
                                               data: PageDataStatus(dataDate: "2020-10-15", source: "snapshot", stale: false), text: PageText(.en)))
        let byAGS = Dictionary(uniqueKeysWithValues: paths.map { ($0["data-ags"] ?? "", $0) })
        #expect(byAGS["09162"]?["fill"] == MapSVG.noDataFill)
        #expect(byAGS["09162"]?["data-phase"] == "none")
        #expect(byAGS["09564"]?["fill"] == ruleSet.outside.color.hex)
        #expect(byAGS["09564"]?["data-phase"] == "outside")
        #expect(byAGS["09175"]?["data-phase"] != "outside")
    }

    @Test("the map stays within 300 KB and keeps every district recognisable")
    func sizeBound() throws {
        let shapes = try MapShapes.bundled()
        let svg = MapSVG.render(shapes: shapes, districts: [:], data: PageDataStatus(dataDate: nil, source: "", stale: false), text: PageText(.de))
        #expect(svg.utf8.count < 300_000, "map is \(svg.utf8.count) bytes")
        // A district drawn with a handful of vertices would be a triangle, not a shape.
        #expect(shapes.shapes.allSatisfy { $0.vertices >= 12 })
        let total = shapes.shapes.reduce(0) { $0 + $1.vertices }
        let outlines = try DistrictOutline.bundled(prefix: "09")
        let original = outlines.reduce(0) { $0 + $1.rings.reduce(0) { $0 + $1.count } }
        #expect(total * 3 < original, "kept \(total) of \(original) vertices")
    }

    @Test("a Germany-wide rule set draws all 400 districts: Bavaria from VG250, the rest from VG1000, in a map of bounded size")
    func germany() throws {
        let shapes = try MapShapes.bundled(prefixes: [])
        #expect(shapes.shapes.count == 400)
        #expect(Set(shapes.shapes.map(\.ags)).count == 400)
        #expect(shapes.shapes.filter { $0.ags.hasPrefix("09") }.count == 96)
        #expect(shapes.shapes.contains { $0.ags == "11000" })
        // Germany is taller than wide: the view box follows the region's extent.
        #expect(shapes.height > MapShapes.width)
        let svg = MapSVG.render(shapes: shapes, districts: [:], data: PageDataStatus(dataDate: nil, source: "", stale: false),
                                text: PageText(.de, region: .germany))
        #expect(svg.utf8.count < 600_000, "map is \(svg.utf8.count) bytes")
        #expect(svg.contains("Deutschland"))
        #expect(try MapShapes.bundled(prefixes: ["09"]).shapes.count == 96)
    }

    @Test("stale data hatches the map; current data does not")
    func staleHatched() throws {
        let shapes = try MapShapes.bundled()
        let stale = MapSVG.render(shapes: shapes, districts: [:], data: PageDataStatus(dataDate: "2020-10-15", source: "rki", stale: true), text: PageText(.en))
        let fresh = MapSVG.render(shapes: shapes, districts: [:], data: PageDataStatus(dataDate: "2020-10-15", source: "rki", stale: false), text: PageText(.en))
        #expect(stale.contains(#"class="map stale""#))
        #expect(fresh.contains(#"class="map""#))
        #expect(stale.contains("(stale)"))
        #expect(!fresh.contains("(stale)"))
    }

    @Test("a district name with markup is escaped in the tooltip and the attributes")
    func namesEscaped() throws {
        let evil = #"<script>alert("x")</script> & 'Co'"#
        let districts = ["09162": DistrictStatus(ags: "09162", name: evil, incidence: 12.5, phase: .phase(.green), color: RGB(hex: "#00A651"))]
        let svg = MapSVG.render(shapes: try MapShapes.bundled(), districts: districts, data: PageDataStatus(dataDate: "2020-10-15", source: "rki", stale: false), text: PageText(.en))
        #expect(!svg.contains("<script>"))
        #expect(svg.contains(#"data-name="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;Co&#39;""#))
    }
}
