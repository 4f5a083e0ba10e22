import Foundation

extension DistrictIndex {
    /// The property names tried, in order, when no code property is given.
    public static let codePropertyCandidates = ["ARS", "RS", "AGS"]

    /// An index over a user-supplied GeoJSON FeatureCollection of districts.
    ///
    /// Every feature is one district polygon set, all in one layer (no seam rules apply).
    /// - Parameters:
    ///   - geoJSON: the file's bytes.
    ///   - codeProperty: the property holding the district code; nil tries ARS, RS, AGS.
    ///     Codes longer than 5 digits (12-digit RS) are cut to their district part.
    ///   - snapMetres: gap tolerance for points in no polygon (0 disables it).
    /// - Throws: ``GeometryError`` naming the feature and ring at fault.
    public convenience init(
        geoJSON: Data, codeProperty: String? = nil, snapMetres: Double = DistrictIndex.bundledSnapMetres
    ) throws(GeometryError) {
        let raw = try GeoJSONReader.read(geoJSON, codeProperty: codeProperty)
        try self.init(raw: raw, snapMetres: snapMetres)
    }
}

enum GeoJSONReader {
    static func read(_ data: Data, codeProperty: String?) throws(GeometryError) -> [RawEntry] {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            // JSON has no NaN or Infinity; some GIS tools write them anyway, so say so.
            let text = String(decoding: data.prefix(50_000_000), as: UTF8.self)
            if text.contains("NaN") || text.contains("Infinity") {
                throw .notJSON("it contains NaN or Infinity, which JSON does not allow as a coordinate")
            }
            throw .notJSON(String(describing: error))
        }
        guard let root = object as? [String: Any], root["type"] as? String == "FeatureCollection",
              let features = root["features"] as? [Any]
        else { throw .notFeatureCollection }

        let tried = codeProperty.map { [$0] } ?? DistrictIndex.codePropertyCandidates
        var out: [RawEntry] = []
        for (index, item) in features.enumerated() {
            guard let feature = item as? [String: Any] else { throw .unsupportedGeometry(feature: index, type: "not an object") }
            let properties = feature["properties"] as? [String: Any] ?? [:]
            guard let rawCode = tried.lazy.compactMap({ codeString(properties[$0]) }).first else {
                throw .missingCodeProperty(feature: index, tried: tried)
            }
            guard rawCode.count >= 5, rawCode.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
                throw .invalidCode(feature: index, value: rawCode)
            }
            let ags = String(rawCode.prefix(5))
            let name = (properties["GEN"] as? String) ?? (properties["name"] as? String) ?? ags
            guard let geometry = feature["geometry"] as? [String: Any] else {
                throw .unsupportedGeometry(feature: index, type: "null")
            }
            let type = geometry["type"] as? String ?? "missing"
            let polygons: [Any]
            switch type {
            case "Polygon":
                guard let c = geometry["coordinates"] as? [Any] else { throw .malformedCoordinates(feature: index) }
                polygons = [c]
            case "MultiPolygon":
                guard let c = geometry["coordinates"] as? [Any] else { throw .malformedCoordinates(feature: index) }
                polygons = c
            default:
                throw .unsupportedGeometry(feature: index, type: type)
            }
            var rings: [[Point]] = []
            for polygon in polygons {
                guard let ringList = polygon as? [Any] else { throw .malformedCoordinates(feature: index) }
                for ringAny in ringList {
                    rings.append(try ring(ringAny, feature: index, ring: rings.count))
                }
            }
            guard !rings.isEmpty else { throw .malformedCoordinates(feature: index) }
            out.append(RawEntry(ags: ags, name: name, layer: .primary, rings: rings))
        }
        guard !out.isEmpty else { throw .noFeatures }
        return out
    }

    /// A district code from a string or an integer property (integers are zero-padded to 5 digits).
    static func codeString(_ value: Any?) -> String? {
        if let s = value as? String, !s.isEmpty { return s }
        if let i = value as? Int, i >= 0 {
            let s = String(i)
            return s.count < 5 ? String(repeating: "0", count: 5 - s.count) + s : s
        }
        if let d = value as? Double { return String(d) }
        return nil
    }

    static func ring(_ value: Any, feature: Int, ring: Int) throws(GeometryError) -> [Point] {
        guard let positions = value as? [Any] else { throw .malformedCoordinates(feature: feature) }
        var points: [Point] = []
        points.reserveCapacity(positions.count)
        for p in positions {
            guard let pair = p as? [Any], pair.count >= 2,
                  let x = (pair[0] as? NSNumber)?.doubleValue, let y = (pair[1] as? NSNumber)?.doubleValue
            else { throw .malformedCoordinates(feature: feature) }
            guard x.isFinite, y.isFinite else { throw .nonFiniteCoordinate(feature: feature, ring: ring) }
            guard (-180.0...180.0).contains(x), (-90.0...90.0).contains(y) else {
                throw .coordinateOutOfRange(feature: feature, ring: ring, longitude: x, latitude: y)
            }
            points.append(Point(x: x, y: y))
        }
        guard points.count >= 4 else { throw .tooFewPoints(feature: feature, ring: ring, count: points.count) }
        guard points.first == points.last else { throw .openRing(feature: feature, ring: ring) }
        points.removeLast()
        return points
    }
}
