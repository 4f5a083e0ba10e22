import Foundation

/// One district's outline for drawing: its rings as longitude/latitude pairs in degrees.
///
/// The index keeps edges, not rings; a map needs the rings in order, so they are read again
/// from the bundle rather than reassembled from the grid.
public struct DistrictOutline: Sendable, Hashable {
    /// A position in degrees.
    public struct Vertex: Sendable, Hashable {
        public var longitude: Double
        public var latitude: Double

        public init(longitude: Double, latitude: Double) {
            self.longitude = longitude
            self.latitude = latitude
        }
    }

    /// 5-digit AGS.
    public let ags: String
    /// BKG name (GEN).
    public let name: String
    /// Open rings (no repeated closing vertex): outer parts and holes alike, to be filled
    /// by the even-odd rule as the index decides membership.
    public let rings: [[Vertex]]

    public init(ags: String, name: String, rings: [[Vertex]]) {
        self.ags = ags
        self.name = name
        self.rings = rings
    }

    /// The outlines of the bundled main layer (VG250 for Bavaria) whose AGS starts with
    /// `prefix`, ordered by AGS; read from the bundle on each call.
    public static func bundled(prefix: String) throws(GeometryError) -> [DistrictOutline] {
        try bundled(prefixes: [prefix])
    }

    /// The bundled outlines of the districts whose code starts with one of `prefixes` (all
    /// of Germany when empty), each from the best layer that has it (VG250 in Bavaria, VG1000 elsewhere).
    public static func bundled(prefixes: [String]) throws(GeometryError) -> [DistrictOutline] {
        guard let url = Bundle.module.url(forResource: "districts", withExtension: "ampelgeo", subdirectory: "geometry")
        else { throw .missingBundle }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw .corruptBundle("cannot read \(url.path): \(error)")
        }
        return try PackedReader.read(data)
            .filter { entry in
                (entry.layer == .primary || entry.layer == .secondary)
                    && (prefixes.isEmpty || prefixes.contains { entry.ags.hasPrefix($0) })
            }
            .map { entry in
                DistrictOutline(
                    ags: entry.ags, name: entry.name,
                    rings: entry.rings.map { ring in ring.map { Vertex(longitude: $0.x, latitude: $0.y) } })
            }
            .sorted { $0.ags < $1.ags }
    }
}
