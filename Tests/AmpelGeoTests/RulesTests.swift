import AmpelGeo
import Testing

/// The documented decision rules, on synthetic geometry where the right answer is obvious.
@Suite struct RulesTests {
    @Test func pointOnSharedEdgeBelongsToTheEastOrNorthSide() throws {
        let index = try DistrictIndex(geoJSON: Fixtures.fourSquares, snapMetres: 0)
        // Vertical border x = 1 between SW and SE: the east side.
        #expect(try index.lookupAGS(latitude: 0.5, longitude: 1) == "09002")
        // Horizontal border y = 1 between SW and NW: the north side.
        #expect(try index.lookupAGS(latitude: 1, longitude: 0.5) == "09003")
        // The vertex shared by all four: north-east.
        #expect(try index.lookupAGS(latitude: 1, longitude: 1) == "09004")
        // Outer corners and edges of the union still belong to a district when it is to the north-east.
        #expect(try index.lookupAGS(latitude: 0, longitude: 0) == "09001")
        #expect(try index.lookupAGS(latitude: 0.5, longitude: 0) == "09001")
        // ...and to none when the district lies south or west of the point.
        #expect(try index.lookupAGS(latitude: 2, longitude: 0.5) == nil)
        #expect(try index.lookupAGS(latitude: 0.5, longitude: 2) == nil)
        for (lat, lon) in [(0.5, 1.0), (1.0, 0.5), (1.0, 1.0), (0.0, 0.0), (2.0, 0.5)] {
            #expect(try index.lookup(latitude: lat, longitude: lon) == index.lookupByScan(latitude: lat, longitude: lon))
        }
    }

    @Test func enclaveInAHoleBelongsToTheEnclave() throws {
        let index = try DistrictIndex(geoJSON: Fixtures.enclave, snapMetres: 0)
        #expect(try index.lookupAGS(latitude: 10.1, longitude: 10.1) == "09010")   // the ring district
        #expect(try index.lookupAGS(latitude: 10.3, longitude: 10.3) == "09020")   // its hole, filled by the enclave
        #expect(try index.lookupAGS(latitude: 10.7, longitude: 10.7) == nil)       // an empty hole
        #expect(try index.lookupAGS(latitude: 10.25, longitude: 12.25) == "09020") // the enclave's second part
        #expect(try index.lookupAGS(latitude: 10.5, longitude: 11.5) == nil)       // between the parts
        #expect(index.districts.map(\.ags) == ["09010", "09020"])
    }

    @Test func overlapGoesToTheLowestCodeAndGapsToTheNearestWithinSnap() throws {
        let index = try DistrictIndex(geoJSON: Fixtures.overlapAndGap, snapMetres: 15)
        #expect(try index.lookupAGS(latitude: 0.5, longitude: 0.75) == "09101")  // in both: lowest AGS
        #expect(try index.lookupAGS(latitude: 0.5, longitude: 0.25) == "09102")
        #expect(try index.lookupAGS(latitude: 0.5, longitude: 1.25) == "09101")
        let metre = 1 / 111_195.08
        // In the 10 m gap: 3 m from South, 7 m from North.
        let south = try #require(try index.lookup(latitude: 1 + 3 * metre, longitude: 3.5))
        #expect(south.ags == "09201")
        #expect(south.match == .nearest)
        #expect(try index.lookupAGS(latitude: 1 + 8 * metre, longitude: 3.5) == "09202")
        // 14 m outside a district: snapped; 16 m: outside.
        #expect(try index.lookupAGS(latitude: -14 * metre, longitude: 3.5) == "09201")
        #expect(try index.lookupAGS(latitude: -16 * metre, longitude: 3.5) == nil)
        let strict = try DistrictIndex(geoJSON: Fixtures.overlapAndGap, snapMetres: 0)
        #expect(try strict.lookupAGS(latitude: 1 + 3 * metre, longitude: 3.5) == nil)
    }

    @Test(arguments: [
        (Double.nan, 11.0), (48.0, Double.nan), (Double.infinity, 11.0), (48.0, -Double.infinity),
        (90.000001, 11.0), (-91.0, 11.0), (48.0, 180.5), (48.0, -181.0),
    ])
    func invalidCoordinatesAreRejected(latitude: Double, longitude: Double) throws {
        let index = try DistrictIndex.bundled()
        #expect(throws: CoordinateError.self) { try index.lookup(latitude: latitude, longitude: longitude) }
        #expect(throws: CoordinateError.self) { try index.lookupAGS(latitude: latitude, longitude: longitude) }
        #expect(throws: CoordinateError.self) { try index.lookupByScan(latitude: latitude, longitude: longitude) }
    }

    @Test func extremeValidCoordinatesAreAnswered() throws {
        let index = try DistrictIndex.bundled()
        for (lat, lon) in [(90.0, 180.0), (-90.0, -180.0), (0.0, 0.0)] {
            #expect(try index.lookup(latitude: lat, longitude: lon) == nil)
        }
    }

    @Test func regionFilter() throws {
        let index = try DistrictIndex.bundled()
        let ulm = try #require(try index.lookup(latitude: 48.3985, longitude: 9.9917))
        let munich = try #require(try index.lookup(latitude: 48.1374, longitude: 11.5755))
        #expect(!RegionFilter.bavaria.contains(ulm))
        #expect(RegionFilter.bavaria.contains(munich))
        #expect(RegionFilter(prefix: "08").contains(ulm))
    }

    /// Cities that are enclaves in their Landkreis (a hole in the Landkreis polygon).
    @Test func realEnclaves() throws {
        let index = try DistrictIndex.bundled()
        #expect(try index.lookupAGS(latitude: 47.8561, longitude: 12.1289) == "09163")  // Rosenheim city
        #expect(try index.lookupAGS(latitude: 47.8800, longitude: 12.0000) == "09187")  // LK Rosenheim
        #expect(try index.lookupAGS(latitude: 49.0134, longitude: 12.1016) == "09362")  // Regensburg city
        #expect(try index.lookupAGS(latitude: 49.0700, longitude: 12.2500) == "09375")  // LK Regensburg
    }
}
