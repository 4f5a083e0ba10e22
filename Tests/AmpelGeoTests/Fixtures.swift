import AmpelGeo
import Foundation

/// Small synthetic GeoJSON files, built in code so each test shows the geometry it relies on.
enum Fixtures {
    /// A closed ring from corner points (the first point is repeated at the end).
    static func ring(_ points: [(Double, Double)]) -> [[Double]] {
        (points + [points[0]]).map { [$0.0, $0.1] }
    }

    /// An axis-aligned rectangle ring, counter-clockwise.
    static func box(_ x0: Double, _ y0: Double, _ x1: Double, _ y1: Double) -> [[Double]] {
        ring([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
    }

    /// A feature with a Polygon (one polygon) or MultiPolygon (several) geometry.
    static func feature(_ code: String, _ name: String, polygons: [[[[Double]]]], property: String = "AGS") -> [String: Any] {
        let geometry: [String: Any] = polygons.count == 1
            ? ["type": "Polygon", "coordinates": polygons[0]]
            : ["type": "MultiPolygon", "coordinates": polygons]
        return ["type": "Feature", "properties": [property: code, "GEN": name], "geometry": geometry]
    }

    static func collection(_ features: [[String: Any]]) -> Data {
        // swiftlint:disable:next force_try
        try! JSONSerialization.data(withJSONObject: ["type": "FeatureCollection", "features": features])
    }

    /// Four unit squares meeting at (1, 1): SW 09001, SE 09002, NW 09003, NE 09004.
    static let fourSquares = collection([
        feature("09001", "SW", polygons: [[box(0, 0, 1, 1)]]),
        feature("09002", "SE", polygons: [[box(1, 0, 2, 1)]]),
        feature("09003", "NW", polygons: [[box(0, 1, 1, 2)]]),
        feature("09004", "NE", polygons: [[box(1, 1, 2, 2)]]),
    ])

    /// District 09010 is a square with two holes; 09020 fills the first hole (an enclave) and
    /// also has a detached second part (a multipolygon). The second hole belongs to no one.
    static let enclave = collection([
        feature("09010", "Ring", polygons: [[box(10, 10, 11, 11), box(10.2, 10.2, 10.4, 10.4), box(10.6, 10.6, 10.8, 10.8)]]),
        feature("09020", "Enclave", polygons: [[box(10.2, 10.2, 10.4, 10.4)], [box(12, 10, 12.5, 10.5)]]),
    ])

    /// Two overlapping squares (the higher code listed first) and two squares 10 m apart.
    static let overlapAndGap: Data = {
        let gap = 10.0 / 111_195.08  // 10 m in degrees of latitude
        return collection([
            feature("09102", "B", polygons: [[box(0, 0, 1, 1)]]),
            feature("09101", "A", polygons: [[box(0.5, 0, 1.5, 1)]]),
            feature("09201", "South", polygons: [[box(3, 0, 4, 1)]]),
            feature("09202", "North", polygons: [[box(3, 1 + gap, 4, 2)]]),
        ])
    }()
}

typealias SeededGenerator = SplitMix64
