import AmpelGeo
import Foundation
import Synchronization

/// The districts of a region as SVG path data: projected, simplified, in tenths of a unit.
///
/// Computed once per process from the bundled VG250 rings (see ``bundled``); the colours are
/// added per request by ``MapSVG``.
public struct MapShapes: Sendable {
    /// One district's drawing.
    public struct Shape: Sendable, Hashable {
        public let ags: String
        /// BKG name (GEN), the fallback label when the data does not know the district.
        public let name: String
        /// SVG path data, absolute first move then relative lines, one subpath per ring.
        public let path: String
        /// Kept vertices over all rings, for the size report.
        public let vertices: Int
    }

    /// The width of the view box; the height follows from the region's extent.
    public static let width = 1000.0
    /// The Douglas-Peucker tolerance in view-box units (DESIGN 61: the page shows the map at
    /// 400-700 px, so 0.6 units stay below half a pixel: 18,778 of the 80,133 VG250 vertices,
    /// 165 KB of SVG).
    public static let defaultTolerance = 0.6

    public let shapes: [Shape]
    public let height: Double

    /// Projects `outlines` (equirectangular around the region's middle latitude, which keeps
    /// Bavaria's shape to within a percent) and simplifies every ring.
    public init(outlines: [DistrictOutline], tolerance: Double = MapShapes.defaultTolerance) {
        let all = outlines.flatMap { $0.rings.flatMap { $0 } }
        let minLon = all.map(\.longitude).min() ?? 0, maxLon = all.map(\.longitude).max() ?? 1
        let minLat = all.map(\.latitude).min() ?? 0, maxLat = all.map(\.latitude).max() ?? 1
        let aspect = cos((minLat + maxLat) / 2 * .pi / 180)
        let scale = Self.width / max((maxLon - minLon) * aspect, 1e-9)
        height = ((maxLat - minLat) * scale).rounded(.up)
        shapes = outlines.map { outline in
            var path = ""
            var vertices = 0
            for ring in outline.rings {
                let plane = ring.map {
                    PlanePoint(x: ($0.longitude - minLon) * aspect * scale, y: (maxLat - $0.latitude) * scale)
                }
                let kept = Simplification.ring(plane, tolerance: tolerance)
                let tenths = Self.tenths(kept)
                // A ring that collapses below a tenth of a unit would draw nothing.
                guard tenths.count >= 3 else { continue }
                vertices += tenths.count
                Self.append(tenths, to: &path)
            }
            return Shape(ags: outline.ags, name: outline.name, path: path, vertices: vertices)
        }
    }

    /// The bundled districts whose code starts with one of `prefixes` (all of Germany when
    /// empty; Bavaria, `09`, by default), built once per list of prefixes.
    public static func bundled(prefixes: [String] = ["09"]) throws(GeometryError) -> MapShapes {
        let key = prefixes.joined(separator: ",")
        let result: Result<MapShapes, GeometryError> = built.withLock { cache in
            if let known = cache[key] { return known }
            let made: Result<MapShapes, GeometryError>
            do throws(GeometryError) {
                made = .success(MapShapes(outlines: try DistrictOutline.bundled(prefixes: prefixes)))
            } catch {
                made = .failure(error)
            }
            cache[key] = made
            return made
        }
        return try result.get()
    }

    private static let built = Mutex<[String: Result<MapShapes, GeometryError>]>([:])

    /// The ring in integer tenths with consecutive duplicates (after rounding) removed.
    static func tenths(_ ring: [PlanePoint]) -> [(Int, Int)] {
        var out: [(Int, Int)] = []
        out.reserveCapacity(ring.count)
        for p in ring {
            let q = (Int((p.x * 10).rounded()), Int((p.y * 10).rounded()))
            if let last = out.last, last == q { continue }
            out.append(q)
        }
        if out.count > 1, let first = out.first, let last = out.last, first == last { out.removeLast() }
        return out
    }

    /// `M x y l dx dy … z`: relative steps are exact in tenths and about half as long as
    /// absolute coordinates.
    static func append(_ ring: [(Int, Int)], to path: inout String) {
        guard let first = ring.first else { return }
        path += "M\(decimal(tenths: first.0)) \(decimal(tenths: first.1))l"
        var previous = first
        for (i, p) in ring.dropFirst().enumerated() {
            let dx = p.0 - previous.0, dy = p.1 - previous.1
            // Negative numbers need no separator: the minus sign separates them.
            if i > 0, dx >= 0 { path += " " }
            path += decimal(tenths: dx)
            if dy >= 0 { path += " " }
            path += decimal(tenths: dy)
            previous = p
        }
        path += "z"
    }

    /// `123.4`, `-0.5`, `7` from tenths.
    static func decimal(tenths value: Int) -> String {
        let sign = value < 0 ? "-" : ""
        let magnitude = abs(value)
        let whole = magnitude / 10, fraction = magnitude % 10
        return fraction == 0 ? "\(sign)\(whole)" : "\(sign)\(whole).\(fraction)"
    }
}
