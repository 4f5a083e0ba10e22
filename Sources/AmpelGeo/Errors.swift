/// A position that cannot be looked up: it is not a point on Earth.
///
/// Lookups reject these instead of answering "no district", because a device that sends
/// latitude 200 has a bug that should be seen, not a position outside Germany.
public enum CoordinateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Latitude is NaN, infinite, or outside [-90, 90].
    case invalidLatitude(Double)
    /// Longitude is NaN, infinite, or outside [-180, 180].
    case invalidLongitude(Double)

    public var description: String {
        switch self {
        case .invalidLatitude(let value): "latitude \(value) is not in [-90, 90]"
        case .invalidLongitude(let value): "longitude \(value) is not in [-180, 180]"
        }
    }
}

/// Why a geometry file could not be used as district geometry.
///
/// Each case names the feature (0-based index in `features`) and ring where it can, so that
/// a user-supplied `--geometry` file can be fixed without guessing.
public enum GeometryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are not JSON at all.
    case notJSON(String)
    /// The JSON is not a GeoJSON object with `"type": "FeatureCollection"` and a `features` array.
    case notFeatureCollection
    /// The collection has no polygon feature.
    case noFeatures
    /// No property among the candidates holds a district code (ARS/RS/AGS or the one asked for).
    case missingCodeProperty(feature: Int, tried: [String])
    /// The code is not a number of at least 5 digits (a German AGS/ARS).
    case invalidCode(feature: Int, value: String)
    /// The geometry is missing or not a Polygon/MultiPolygon.
    case unsupportedGeometry(feature: Int, type: String)
    /// A coordinate is not a `[longitude, latitude]` array of numbers.
    case malformedCoordinates(feature: Int)
    /// A coordinate is NaN or infinite.
    case nonFiniteCoordinate(feature: Int, ring: Int)
    /// A coordinate lies outside [-180, 180] x [-90, 90].
    case coordinateOutOfRange(feature: Int, ring: Int, longitude: Double, latitude: Double)
    /// A ring's last position differs from its first (GeoJSON requires closed rings).
    case openRing(feature: Int, ring: Int)
    /// A ring has fewer than 4 positions (3 distinct corners plus the closing one).
    case tooFewPoints(feature: Int, ring: Int, count: Int)
    /// The bundled binary geometry is damaged or of an unknown version.
    case corruptBundle(String)
    /// The bundled geometry resource is not in the bundle.
    case missingBundle

    public var description: String {
        switch self {
        case .notJSON(let detail): "not JSON: \(detail)"
        case .notFeatureCollection: "not a GeoJSON FeatureCollection (need \"type\": \"FeatureCollection\" and a \"features\" array)"
        case .noFeatures: "the FeatureCollection has no Polygon or MultiPolygon feature"
        case .missingCodeProperty(let feature, let tried):
            "feature \(feature): no district code property (tried \(tried.joined(separator: ", ")))"
        case .invalidCode(let feature, let value):
            "feature \(feature): district code \"\(value)\" is not a number of at least 5 digits"
        case .unsupportedGeometry(let feature, let type):
            "feature \(feature): geometry type \"\(type)\" is not Polygon or MultiPolygon"
        case .malformedCoordinates(let feature):
            "feature \(feature): coordinates are not arrays of [longitude, latitude] numbers"
        case .nonFiniteCoordinate(let feature, let ring):
            "feature \(feature), ring \(ring): coordinate is NaN or infinite"
        case .coordinateOutOfRange(let feature, let ring, let longitude, let latitude):
            "feature \(feature), ring \(ring): coordinate [\(longitude), \(latitude)] is outside [-180, 180] x [-90, 90]"
        case .openRing(let feature, let ring):
            "feature \(feature), ring \(ring): ring is not closed (last position must equal the first)"
        case .tooFewPoints(let feature, let ring, let count):
            "feature \(feature), ring \(ring): \(count) positions, a ring needs at least 4"
        case .corruptBundle(let detail): "bundled geometry is damaged: \(detail)"
        case .missingBundle: "bundled geometry resource districts.ampelgeo not found"
        }
    }
}
