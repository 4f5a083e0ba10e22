import AmpelGeo
import Foundation
import Testing

/// Bad `--geometry` files are refused with an error that names what is wrong and where.
@Suite struct GeometryErrorTests {
    func load(_ text: String, codeProperty: String? = nil) throws(GeometryError) -> DistrictIndex {
        try DistrictIndex(geoJSON: Data(text.utf8), codeProperty: codeProperty)
    }

    static let square = "[[[10,48],[11,48],[11,49],[10,49],[10,48]]]"

    static func collection(properties: String = #"{"AGS":"09001"}"#, geometry: String) -> String {
        #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":\#(properties),"geometry":\#(geometry)}]}"#
    }

    @Test func validFileLoads() throws {
        let index = try load(Self.collection(geometry: #"{"type":"Polygon","coordinates":\#(Self.square)}"#))
        #expect(try index.lookupAGS(latitude: 48.5, longitude: 10.5) == "09001")
        #expect(index.district(ags: "09001")?.name == "09001")  // no GEN: the code stands in as name
    }

    @Test func codePropertyIsDetectedOrNamed() throws {
        let geometry = #"{"type":"Polygon","coordinates":\#(Self.square)}"#
        let rs = try load(Self.collection(properties: #"{"RS":"091620000000","GEN":"X"}"#, geometry: geometry))
        #expect(try rs.lookupAGS(latitude: 48.5, longitude: 10.5) == "09162")
        let custom = try load(Self.collection(properties: #"{"kreis":9162}"#, geometry: geometry), codeProperty: "kreis")
        #expect(try custom.lookupAGS(latitude: 48.5, longitude: 10.5) == "09162")
    }

    @Test(arguments: [
        ("this is not json", "notJSON"),
        (#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"AGS":"09001"},"geometry":{"type":"Polygon","coordinates":[[[10,48],[NaN,48],[11,49],[10,48]]]}}]}"#, "notJSON"),
        (#"{"type":"Feature","properties":{}}"#, "notFeatureCollection"),
        (#"[1,2,3]"#, "notFeatureCollection"),
        (#"{"type":"FeatureCollection","features":[]}"#, "noFeatures"),
    ])
    func structuralErrors(text: String, expected: String) {
        do throws(GeometryError) {
            _ = try load(text)
            Issue.record("accepted invalid GeoJSON")
        } catch {
            #expect(caseName(error) == expected, "\(error)")
        }
    }

    @Test func missingCodeProperty() {
        let text = Self.collection(properties: #"{"GEN":"X"}"#, geometry: #"{"type":"Polygon","coordinates":\#(Self.square)}"#)
        #expect(throws: GeometryError.missingCodeProperty(feature: 0, tried: ["ARS", "RS", "AGS"])) { try load(text) }
        #expect(throws: GeometryError.missingCodeProperty(feature: 0, tried: ["KRS"])) { try load(text, codeProperty: "KRS") }
    }

    @Test func invalidCode() {
        let text = Self.collection(properties: #"{"AGS":"Bayern"}"#, geometry: #"{"type":"Polygon","coordinates":\#(Self.square)}"#)
        #expect(throws: GeometryError.invalidCode(feature: 0, value: "Bayern")) { try load(text) }
    }

    @Test func openRing() {
        let text = Self.collection(geometry: #"{"type":"Polygon","coordinates":[[[10,48],[11,48],[11,49],[10,49]]]}"#)
        #expect(throws: GeometryError.openRing(feature: 0, ring: 0)) { try load(text) }
    }

    @Test func tooFewPoints() {
        let text = Self.collection(geometry: #"{"type":"Polygon","coordinates":[[[10,48],[11,48],[10,48]]]}"#)
        #expect(throws: GeometryError.tooFewPoints(feature: 0, ring: 0, count: 3)) { try load(text) }
    }

    @Test func nonFiniteCoordinate() {
        // 1e999 is valid JSON text but overflows to infinity.
        let text = Self.collection(geometry: #"{"type":"Polygon","coordinates":[[[10,48],[1e999,48],[11,49],[10,48]]]}"#)
        #expect(throws: GeometryError.self) { try load(text) }
        do throws(GeometryError) {
            _ = try load(text)
        } catch {
            #expect(error == .nonFiniteCoordinate(feature: 0, ring: 0) || caseName(error) == "notJSON")
        }
    }

    @Test func coordinateOutOfRange() {
        let text = Self.collection(geometry: #"{"type":"Polygon","coordinates":[[[10,48],[11,95],[11,49],[10,48]]]}"#)
        #expect(throws: GeometryError.coordinateOutOfRange(feature: 0, ring: 0, longitude: 11, latitude: 95)) { try load(text) }
    }

    @Test func unsupportedAndMalformedGeometry() {
        #expect(throws: GeometryError.unsupportedGeometry(feature: 0, type: "Point")) {
            try load(Self.collection(geometry: #"{"type":"Point","coordinates":[10,48]}"#))
        }
        #expect(throws: GeometryError.unsupportedGeometry(feature: 0, type: "null")) {
            try load(Self.collection(geometry: "null"))
        }
        #expect(throws: GeometryError.malformedCoordinates(feature: 0)) {
            try load(Self.collection(geometry: #"{"type":"Polygon","coordinates":[[["a","b"],[11,48],[11,49],[10,48]]]}"#))
        }
    }

    @Test func messagesNameTheProblem() {
        #expect(GeometryError.openRing(feature: 3, ring: 1).description.contains("feature 3, ring 1"))
        #expect(GeometryError.missingCodeProperty(feature: 0, tried: ["ARS", "RS"]).description.contains("ARS, RS"))
    }

    @Test func corruptPackedDataIsRejected() {
        #expect(throws: GeometryError.self) { try DistrictIndex(packed: Data("AMPELGEO".utf8)) }
        #expect(throws: GeometryError.corruptBundle("not an Ampel geometry file")) {
            try DistrictIndex(packed: Data(repeating: 0, count: 64))
        }
    }
}

/// The enum case name of an error, e.g. "notJSON".
func caseName(_ error: GeometryError) -> String {
    switch error {
    case .notJSON: "notJSON"
    case .notFeatureCollection: "notFeatureCollection"
    case .noFeatures: "noFeatures"
    case .missingCodeProperty: "missingCodeProperty"
    case .invalidCode: "invalidCode"
    case .unsupportedGeometry: "unsupportedGeometry"
    case .malformedCoordinates: "malformedCoordinates"
    case .nonFiniteCoordinate: "nonFiniteCoordinate"
    case .coordinateOutOfRange: "coordinateOutOfRange"
    case .openRing: "openRing"
    case .tooFewPoints: "tooFewPoints"
    case .corruptBundle: "corruptBundle"
    case .missingBundle: "missingBundle"
    }
}
