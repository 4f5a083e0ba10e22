import Foundation

extension DistrictIndex {
    /// The snap distance used for the bundled geometry: the widest VG250 gap is 9 m (SOURCES.md).
    public static let bundledSnapMetres = 15.0

    /// The index over the bundled BKG geometry (VG250 Bavaria + VG1000 elsewhere), built once per process.
    ///
    /// The first call reads `districts.ampelgeo` (made by `tools/pack_geometry.py`) and builds the
    /// grid; later calls return the same instance.
    public static func bundled() throws(GeometryError) -> DistrictIndex {
        try bundledResult.get()
    }

    private static let bundledResult: Result<DistrictIndex, GeometryError> = {
        guard let url = Bundle.module.url(forResource: "districts", withExtension: "ampelgeo", subdirectory: "geometry")
        else { return .failure(.missingBundle) }
        do {
            let data = try Data(contentsOf: url)
            return .success(try DistrictIndex(packed: data))
        } catch let error as GeometryError {
            return .failure(error)
        } catch {
            return .failure(.corruptBundle("cannot read \(url.path): \(error)"))
        }
    }()

    /// An index over geometry in Ampel's packed format (see tools/pack_geometry.py for the layout).
    public convenience init(packed data: Data, snapMetres: Double = DistrictIndex.bundledSnapMetres) throws(GeometryError) {
        let raw = try PackedReader.read(data)
        try self.init(raw: raw, snapMetres: snapMetres)
    }
}

/// Reads the packed format written by tools/pack_geometry.py, checking every length against the data.
enum PackedReader {
    static func read(_ data: Data) throws(GeometryError) -> [RawEntry] {
        let result: Result<[RawEntry], GeometryError> = data.withUnsafeBytes { bytes in
            var offset = 0
            func need(_ n: Int) throws(GeometryError) {
                guard n >= 0, offset + n <= bytes.count else {
                    throw .corruptBundle("truncated at byte \(offset)")
                }
            }
            func u8() throws(GeometryError) -> UInt8 {
                try need(1)
                defer { offset += 1 }
                return bytes[offset]
            }
            func u32() throws(GeometryError) -> Int {
                try need(4)
                defer { offset += 4 }
                return Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            }
            func text(_ n: Int) throws(GeometryError) -> String {
                try need(n)
                defer { offset += n }
                return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + n)]), as: UTF8.self)
            }
            do throws(GeometryError) {
                guard try text(8) == "AMPELGEO" else { throw .corruptBundle("not an Ampel geometry file") }
                let version = try u32()
                guard version == 1 else { throw .corruptBundle("unknown version \(version)") }
                let entryCount = try u32(), ringCount = try u32(), pointCount = try u32()
                var heads: [(ags: String, layer: Layer, name: String, first: Int, count: Int)] = []
                heads.reserveCapacity(entryCount)
                for _ in 0..<entryCount {
                    let ags = try text(5)
                    guard let layer = Layer(rawValue: try u8()) else { throw .corruptBundle("unknown layer") }
                    let name = try text(Int(try u8()))
                    let first = try u32(), count = try u32()
                    guard ags.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), first + count <= ringCount else {
                        throw .corruptBundle("bad entry \(ags)")
                    }
                    heads.append((ags, layer, name, first, count))
                }
                var rings: [(first: Int, count: Int)] = []
                rings.reserveCapacity(ringCount)
                for _ in 0..<ringCount {
                    let first = try u32(), count = try u32()
                    guard first + count <= pointCount, count >= 3 else { throw .corruptBundle("bad ring") }
                    rings.append((first, count))
                }
                try need(pointCount * 16)
                let base = offset
                func point(_ i: Int) throws(GeometryError) -> Point {
                    let o = base + i * 16
                    let x = Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt64.self)))
                    let y = Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: o + 8, as: UInt64.self)))
                    guard x.isFinite, y.isFinite else { throw .corruptBundle("non-finite coordinate") }
                    return Point(x: x, y: y)
                }
                var out: [RawEntry] = []
                out.reserveCapacity(entryCount)
                for h in heads {
                    var rs: [[Point]] = []
                    rs.reserveCapacity(h.count)
                    for r in rings[h.first..<(h.first + h.count)] {
                        var pts: [Point] = []
                        pts.reserveCapacity(r.count)
                        for i in r.first..<(r.first + r.count) { pts.append(try point(i)) }
                        rs.append(pts)
                    }
                    out.append(RawEntry(ags: h.ags, name: h.name, layer: h.layer, rings: rs))
                }
                return .success(out)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
