import AmpelGeo
import Testing

/// Places whose district is known from the map, answered by the bundled geometry.
@Suite struct KnownPlacesTests {
    let index: DistrictIndex

    init() throws {
        index = try DistrictIndex.bundled()
    }

    @Test(arguments: [
        (48.1374, 11.5755, "09162", "München"),            // Marienplatz, SK München
        (48.0658, 11.6155, "09184", "München"),            // Unterhaching, LK München
        (47.8371, 12.9769, "09172", "Berchtesgadener Land"),  // Freilassing
        (48.3985, 9.9917, "08421", "Ulm"),                 // Ulm Münster, Baden-Württemberg
        (49.4521, 11.0767, "09564", "Nürnberg"),           // Nürnberg Hauptmarkt
        (52.5163, 13.3777, "11000", "Berlin"),             // Brandenburger Tor: one Berlin district
    ])
    func knownPlace(latitude: Double, longitude: Double, ags: String, name: String) throws {
        let hit = try #require(try index.lookup(latitude: latitude, longitude: longitude))
        #expect(hit.ags == ags)
        #expect(hit.name == name)
        #expect(hit.match == .inside)
        #expect(try index.lookupAGS(latitude: latitude, longitude: longitude) == ags)
        #expect(try index.lookupByScan(latitude: latitude, longitude: longitude) == hit)
    }

    @Test(arguments: [
        (47.8005, 13.0443),   // Salzburg, Austria
        (47.5740, 10.4540),   // Jungholz, Austria: a hole in LK Oberallgäu
        (48.8566, 2.3522),    // Paris
        (50.0755, 14.4378),   // Prague
        (54.5, 7.0),          // North Sea, inside Germany's bounding box
        (-33.9, 18.4),        // Cape Town, far outside the grid
    ])
    func outsideGermany(latitude: Double, longitude: Double) throws {
        #expect(try index.lookup(latitude: latitude, longitude: longitude) == nil)
        #expect(try index.lookupByScan(latitude: latitude, longitude: longitude) == nil)
    }

    @Test func bundleHasAllDistricts() throws {
        // VG1000 2024: 400 districts (Eisenach merged into Wartburgkreis); 96 of them Bavarian.
        #expect(index.districts.count == 400)
        #expect(index.districts(in: .bavaria).count == 96)
        #expect(index.contains(ags: "11000"))
        #expect(!index.contains(ags: "16056"))
        #expect(index.district(ags: "09162")?.name == "München")
    }
}
