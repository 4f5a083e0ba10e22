/// A German district as the geometry knows it: its 5-digit AGS and its BKG name (GEN).
public struct District: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Amtlicher Gemeindeschlüssel on district level, 5 digits, e.g. "09162".
    public let ags: String
    /// The BKG short name (GEN), e.g. "München".
    public let name: String

    public init(ags: String, name: String) {
        self.ags = ags
        self.name = name
    }

    public static func < (lhs: District, rhs: District) -> Bool { lhs.ags < rhs.ags }

    public var description: String { "\(ags) \(name)" }
}

/// The answer to a position lookup: the district and how it was decided.
public struct DistrictHit: Sendable, Hashable, CustomStringConvertible {
    /// How the district was found, so callers can tell a clear hit from a border decision.
    public enum Match: Sendable, Hashable {
        /// A polygon of the main layers (VG250 Bavaria, VG1000 elsewhere, or a user file) contains the point.
        case inside
        /// No polygon contains the point; the nearest district border is within the snap distance
        /// (the slivers between independently simplified VG250 polygons).
        case nearest
        /// Only the VG1000 Bavaria fallback contains the point: the seam where VG250 Bavaria and
        /// VG1000 of the neighbouring state do not meet.
        case seamFallback
    }

    /// 5-digit AGS. Berlin is the single district "11000" (see docs/geo.md).
    public let ags: String
    /// BKG name (GEN).
    public let name: String
    /// How the district was decided.
    public let match: Match

    public init(ags: String, name: String, match: Match) {
        self.ags = ags
        self.name = name
        self.match = match
    }

    /// The district without the match detail.
    public var district: District { District(ags: ags, name: name) }

    public var description: String { "\(ags) \(name)" }
}

/// The monitored region: districts whose AGS starts with a prefix (default Bavaria, "09").
///
/// Lets the daemon say "in Germany, but outside the region" (phase `outside` with the
/// district named) apart from "outside Germany" (no district at all).
public struct RegionFilter: Sendable, Hashable {
    /// The AGS prefix, e.g. "09" for Bavaria; "" matches every district.
    public let prefix: String

    /// Bavaria, the region the daemon monitors by default.
    public static let bavaria = RegionFilter(prefix: "09")

    public init(prefix: String) {
        self.prefix = prefix
    }

    /// Whether a district code lies in the region.
    public func contains(ags: String) -> Bool { ags.hasPrefix(prefix) }

    /// Whether a hit lies in the region.
    public func contains(_ hit: DistrictHit) -> Bool { contains(ags: hit.ags) }
}

/// Which layer a polygon set belongs to; lower ranks win (see docs/geo.md).
enum Layer: UInt8, Sendable {
    /// VG250 Bavaria in the bundle; every polygon of a user file.
    case primary = 0
    /// VG1000 outside Bavaria in the bundle.
    case secondary = 1
    /// VG1000 Bavaria near the other states: used only when nothing else answers.
    case fallback = 2
}

/// One district's rings in one layer, before indexing.
struct RawEntry: Sendable {
    var ags: String
    var name: String
    var layer: Layer
    /// Rings as open coordinate lists (the closing point removed); holes and parts alike,
    /// since membership is decided by the even-odd rule over all rings.
    var rings: [[Point]]
}

/// A longitude/latitude pair in degrees.
struct Point: Sendable, Equatable {
    var x: Double
    var y: Double
}

/// A ring edge with the entry it belongs to; the unit both the grid and the scan test against.
struct Edge: Sendable {
    var x1: Double
    var y1: Double
    var x2: Double
    var y2: Double
    var entry: UInt32
}

/// The edges of all rings, each vertex stored once: edge `k` runs from vertex `k + r` to
/// vertex `k + r + 1`, where `r` is the number of its ring (every ring stores its last point
/// once more in front, as the start of its first edge).
///
/// Stored as `[Edge]` the ~265,000 edges of the bundle took 40 bytes each (10.6 MB, most of the
/// index); here 16 bytes per vertex plus 4 per edge (about 5.4 MB). The coordinates are the
/// same `Double`s, so every predicate gives the same bits as before.
struct EdgeStore: Sendable {
    private(set) var points: [Point] = []
    /// The ring number of each edge.
    private var ringOfEdge: [UInt32] = []
    /// The entry (polygon set) of each ring.
    private var ringEntry: [UInt32] = []

    var count: Int { ringOfEdge.count }
    var isEmpty: Bool { ringOfEdge.isEmpty }
    var indices: Range<Int> { 0..<count }

    mutating func reserveCapacity(edges: Int) {
        ringOfEdge.reserveCapacity(edges)
        points.reserveCapacity(edges)
    }

    /// Appends the closed ring's edges (last point to first, then along the ring).
    mutating func appendRing(_ ring: [Point], entry: UInt32) {
        guard let last = ring.last else { return }
        let number = UInt32(ringEntry.count)
        ringEntry.append(entry)
        points.append(last)
        points.append(contentsOf: ring)
        ringOfEdge.append(contentsOf: repeatElement(number, count: ring.count))
    }

    @inline(__always)
    subscript(k: Int) -> Edge {
        let ring = ringOfEdge[k]
        let v = k &+ Int(ring)
        let a = points[v], b = points[v &+ 1]
        return Edge(x1: a.x, y1: a.y, x2: b.x, y2: b.y, entry: ringEntry[Int(ring)])
    }

    /// Bytes held by the arrays.
    var memoryBytes: Int {
        points.count * MemoryLayout<Point>.stride + ringOfEdge.count * 4 + ringEntry.count * 4
    }
}

/// The exact predicates shared by the grid and the brute-force scan.
///
/// Both sides must compute bit-identical intersections, so the formulas live here once.
enum Predicates {
    /// Whether the edge crosses the horizontal line through `y` (half-open in y, so a vertex
    /// on the line is counted once, by the edge that lies above it).
    @inline(__always)
    static func straddles(_ e: Edge, _ y: Double) -> Bool {
        (e.y1 > y) != (e.y2 > y)
    }

    /// The x where a straddling edge meets the line through `y`.
    @inline(__always)
    static func crossingX(_ e: Edge, _ y: Double) -> Double {
        e.x1 + (y - e.y1) * (e.x2 - e.x1) / (e.y2 - e.y1)
    }

    /// Metres per degree of latitude (mean Earth radius 6,371,008.8 m).
    static let metresPerDegree = 111_195.08

    /// Distance in metres from (x, y) to the edge, in a local equirectangular projection at y.
    @inline(__always)
    static func distanceMetres(_ e: Edge, _ x: Double, _ y: Double, cosLat: Double) -> Double {
        let kx = cosLat * metresPerDegree
        let ky = metresPerDegree
        let ax = (e.x1 - x) * kx, ay = (e.y1 - y) * ky
        let bx = (e.x2 - x) * kx, by = (e.y2 - y) * ky
        let dx = bx - ax, dy = by - ay
        let len2 = dx * dx + dy * dy
        var t = len2 > 0 ? -(ax * dx + ay * dy) / len2 : 0
        if t < 0 { t = 0 } else if t > 1 { t = 1 }
        let px = ax + t * dx, py = ay + t * dy
        return (px * px + py * py).squareRoot()
    }
}
