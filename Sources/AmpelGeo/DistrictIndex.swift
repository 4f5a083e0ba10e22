import Foundation

/// Answers "which German district is this position in" exactly, mostly from one memory read.
///
/// A uniform grid covers the geometry. A cell that no district border comes near (within the
/// snap distance) stores its answer directly. A border cell lists the edges that pass near it;
/// a lookup there counts, per district, the edge crossings of a ray from the point towards +x
/// (the even-odd rule), walking right through border cells until it reaches a pure cell whose
/// district set is known. The result is bit-identical to ``lookupByScan(latitude:longitude:)``,
/// the brute-force reference over every polygon.
///
/// Decision rules (docs/geo.md): among the polygons containing the point the lowest layer
/// wins (VG250 Bavaria, then VG1000 elsewhere), then the lowest AGS; a point in no polygon
/// takes the nearest district border within ``snapMetres``; only then the VG1000 Bavaria seam
/// fallback; otherwise no district.
///
/// ```swift
/// let index = try DistrictIndex.bundled()
/// let hit = try index.lookup(latitude: 48.1374, longitude: 11.5755)  // 09162 München
/// ```
public final class DistrictIndex: Sendable {
    /// Unique districts, sorted by AGS.
    public let districts: [District]
    /// How far (metres) a point outside every polygon may be from a district to still belong to it.
    public let snapMetres: Double

    let entries: [IndexEntry]
    let edges: EdgeStore
    let grid: Grid
    /// Cell codes: bit 31 clear = pure cell (bits 0-15 answer code, bits 16-30 set id);
    /// bit 31 set = border cell (bits 0-30 index into `borderStart`).
    let cells: [UInt32]
    let borderStart: [UInt32]
    let borderEdges: [UInt32]
    /// A coarse level over blocks of 8 x 8 cells (about 140 KB, stays in cache): a block whose cells
    /// are all pure with the same code holds that code; any other block holds `borderFlag`, "ask the
    /// fine grid". Random positions would otherwise miss the cache on nearly every lookup.
    let coarse: [UInt32]
    let coarseCols: Int
    static let coarseShift = 3
    /// District sets (entry ids) of pure cells, needed when a border walk ends in one:
    /// set i is `setMembers[setStart[i]..<setStart[i + 1]]`.
    let setStart: [UInt32]
    let setMembers: [UInt32]
    /// Prebuilt answers per entry (inside/seam fallback, and snapped), so a lookup copies, not builds.
    let hits: [DistrictHit]
    let snappedHits: [DistrictHit]
    let districtByAGS: [String: Int]

    init(
        districts: [District], snapMetres: Double, entries: [IndexEntry], edges: EdgeStore, grid: Grid,
        cells: [UInt32], borderStart: [UInt32], borderEdges: [UInt32], sets: [[UInt32]],
        districtByAGS: [String: Int]
    ) {
        self.districts = districts
        self.snapMetres = snapMetres
        self.entries = entries
        self.edges = edges
        self.grid = grid
        self.cells = cells
        self.borderStart = borderStart
        self.borderEdges = borderEdges
        let shift = Self.coarseShift
        let coarseCols = (grid.cols + (1 << shift) - 1) >> shift
        let coarseRows = (grid.rows + (1 << shift) - 1) >> shift
        // Unset blocks hold `unset`; a block that sees a border cell or a second code becomes `borderFlag`.
        let unset: UInt32 = 0xFFFF_FFFF
        var coarse = [UInt32](repeating: unset, count: coarseCols * coarseRows)
        coarse.withUnsafeMutableBufferPointer { coarse in
            cells.withUnsafeBufferPointer { cells in
                for r in 0..<grid.rows {
                    let base = (r >> shift) * coarseCols
                    for c in 0..<grid.cols {
                        let k = base + (c >> shift)
                        let code = cells[r * grid.cols + c]
                        let have = coarse[k]
                        if have == unset {
                            coarse[k] = code
                        } else if have != code {
                            coarse[k] = Self.borderFlag
                        }
                    }
                }
            }
        }
        self.coarse = coarse
        self.coarseCols = coarseCols
        var start: [UInt32] = [0]
        var members: [UInt32] = []
        for set in sets {
            members += set
            start.append(UInt32(members.count))
        }
        self.setStart = start
        self.setMembers = members
        self.hits = entries.map { e in
            DistrictHit(ags: districts[e.district].ags, name: districts[e.district].name,
                        match: e.layer == .fallback ? .seamFallback : .inside)
        }
        self.snappedHits = entries.map { e in
            DistrictHit(ags: districts[e.district].ags, name: districts[e.district].name, match: .nearest)
        }
        self.districtByAGS = districtByAGS
    }

    static let borderFlag: UInt32 = 0x8000_0000
    static let snappedFlag: UInt32 = 0x0001_0000
    static let maxEntries = 0xFFFE
    static let maxSets = 0x7FFF

    struct IndexEntry: Sendable {
        var district: Int
        var layer: Layer
        /// The AGS as a number, for ordering without touching strings.
        var agsNumber: UInt32
        var minX: Double, minY: Double, maxX: Double, maxY: Double
        var firstEdge: Int, edgeCount: Int
    }

    struct Grid: Sendable {
        var minX: Double, minY: Double
        var cellW: Double, cellH: Double
        var cols: Int, rows: Int
        /// 1 / cellW and 1 / cellH: a lookup multiplies. The cell found may differ from the exact
        /// one by a rounding step for points on a cell boundary, which is harmless: pure cells are
        /// farther than the margin from every edge, and the border walk tests exact x-ranges.
        var invW: Double, invH: Double

        @inline(__always) func x0(_ col: Int) -> Double { minX + Double(col) * cellW }
        @inline(__always) func y0(_ row: Int) -> Double { minY + Double(row) * cellH }
    }

    /// Sizes of the built index, for benchmarks and logs.
    public struct Statistics: Sendable {
        public let districts: Int
        public let polygonSets: Int
        public let edges: Int
        public let cells: Int
        public let borderCells: Int
        public let borderEdgeReferences: Int
        public let columns: Int
        public let rows: Int
        /// Bytes held by the index arrays (edges, cells, border lists, sets).
        public let memoryBytes: Int
    }

    /// Sizes of the built index.
    public var statistics: Statistics {
        let border = cells.reduce(0) { $0 + ($1 & Self.borderFlag != 0 ? 1 : 0) }
        let setBytes = (setStart.count + setMembers.count) * 4
        let bytes = edges.memoryBytes + cells.count * 4 + borderStart.count * 4
            + borderEdges.count * 4 + coarse.count * 4 + setBytes + entries.count * MemoryLayout<IndexEntry>.stride
        return Statistics(
            districts: districts.count, polygonSets: entries.count, edges: edges.count, cells: cells.count,
            borderCells: border, borderEdgeReferences: borderEdges.count, columns: grid.cols, rows: grid.rows,
            memoryBytes: bytes)
    }

    // MARK: Public lookups

    /// The district containing the position, or nil when it is in no German district.
    ///
    /// - Throws: ``CoordinateError`` for NaN, infinity, latitude outside [-90, 90] or
    ///   longitude outside [-180, 180]; those are bad input, not a place outside Germany.
    public func lookup(latitude: Double, longitude: Double) throws(CoordinateError) -> DistrictHit? {
        try Self.validate(latitude: latitude, longitude: longitude)
        return hit(code: resolve(x: longitude, y: latitude))
    }

    /// The AGS of the district containing the position (no `DistrictHit` built): the fast path for bulk use.
    public func lookupAGS(latitude: Double, longitude: Double) throws(CoordinateError) -> String? {
        try Self.validate(latitude: latitude, longitude: longitude)
        let code = resolve(x: longitude, y: latitude) & 0xFFFF
        return code == 0 ? nil : districts[entries[Int(code) - 1].district].ags
    }

    /// The position of the district in ``districts``, or nil: allocation-free, for hot loops.
    public func lookupDistrictIndex(latitude: Double, longitude: Double) throws(CoordinateError) -> Int? {
        try Self.validate(latitude: latitude, longitude: longitude)
        let code = resolve(x: longitude, y: latitude) & 0xFFFF
        return code == 0 ? nil : entries[Int(code) - 1].district
    }

    /// The same answer as ``lookup(latitude:longitude:)``, by testing every polygon.
    ///
    /// The reference the index is tested against and the "naive scan" of the benchmark;
    /// it skips a polygon set only when the point is outside its bounding box.
    public func lookupByScan(latitude: Double, longitude: Double) throws(CoordinateError) -> DistrictHit? {
        try Self.validate(latitude: latitude, longitude: longitude)
        return hit(code: scan(x: longitude, y: latitude))
    }

    /// Whether the geometry has a district with this AGS.
    public func contains(ags: String) -> Bool { districtByAGS[ags] != nil }

    /// The district with this AGS, if the geometry has it.
    public func district(ags: String) -> District? { districtByAGS[ags].map { districts[$0] } }

    /// The districts of a region, e.g. the 96 of Bavaria.
    public func districts(in region: RegionFilter) -> [District] {
        districts.filter { region.contains(ags: $0.ags) }
    }

    static func validate(latitude: Double, longitude: Double) throws(CoordinateError) {
        guard latitude.isFinite, (-90.0...90.0).contains(latitude) else { throw .invalidLatitude(latitude) }
        guard longitude.isFinite, (-180.0...180.0).contains(longitude) else { throw .invalidLongitude(longitude) }
    }

    @inline(__always)
    func hit(code: UInt32) -> DistrictHit? {
        let e = Int(code & 0xFFFF)
        guard e != 0 else { return nil }
        return code & Self.snappedFlag != 0 ? snappedHits[e - 1] : hits[e - 1]
    }

    // MARK: Resolution

    /// Answer code for a point: bits 0-15 entry + 1 (0 = none), bit 16 set when snapped.
    @inline(__always)
    func resolve(x: Double, y: Double) -> UInt32 {
        let fx = (x - grid.minX) * grid.invW
        let fy = (y - grid.minY) * grid.invH
        guard fx >= 0, fy >= 0, fx < Double(grid.cols), fy < Double(grid.rows) else { return 0 }
        let col = Int(fx), row = Int(fy)
        let block = coarse[(row >> Self.coarseShift) &* coarseCols &+ (col >> Self.coarseShift)]
        if block & Self.borderFlag == 0 { return block & 0xFFFF }
        let cell = cells[row &* grid.cols &+ col]
        if cell & Self.borderFlag == 0 { return cell & 0xFFFF }
        return resolveBorder(x: x, y: y, row: row, col: col, cell: cell)
    }

    func resolveBorder(x: Double, y: Double, row: Int, col: Int, cell: UInt32) -> UInt32 {
        // Entry ids with odd crossing parity so far; a handful at most in practice.
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { buf -> UInt32 in
            var n = 0
            var overflow = false
            @inline(__always) func toggle(_ e: UInt32) {
                for i in 0..<n where buf[i] == e {
                    n -= 1
                    buf[i] = buf[n]
                    return
                }
                if n == 64 { overflow = true; return }
                buf[n] = e
                n += 1
            }
            let rowBase = row &* grid.cols
            var c = col
            var code = cell
            var upper = grid.x0(col + 1)
            // Walk right: count crossings in (x, upper) of this cell, then [x0, x1) of the next ones.
            while true {
                let b = Int(code & ~Self.borderFlag)
                let lower = c == col ? -Double.infinity : grid.x0(c)
                for k in Int(borderStart[b])..<Int(borderStart[b + 1]) {
                    let e = edges[Int(borderEdges[k])]
                    if Predicates.straddles(e, y) {
                        let xi = Predicates.crossingX(e, y)
                        if xi > x && xi >= lower && xi < upper { toggle(e.entry) }
                    }
                }
                c += 1
                if c == grid.cols { break }
                code = cells[rowBase &+ c]
                if code & Self.borderFlag == 0 {
                    let set = Int((code >> 16) & 0x7FFF)
                    for k in Int(setStart[set])..<Int(setStart[set + 1]) { toggle(setMembers[k]) }
                    break
                }
                upper = grid.x0(c + 1)
            }
            if overflow { return scan(x: x, y: y) }
            return decide(members: UnsafeBufferPointer(rebasing: buf[0..<n]), x: x, y: y) {
                let b = Int(cell & ~Self.borderFlag)
                return borderEdges[Int(borderStart[b])..<Int(borderStart[b + 1])].lazy.map { Int($0) }
            }
        }
    }

    /// The rules: lowest layer then lowest AGS among containing polygons (fallback layer excluded),
    /// else the nearest border within the snap distance, else the fallback layer, else none.
    @inline(__always)
    func decide<S: Sequence<Int>>(
        members: UnsafeBufferPointer<UInt32>, x: Double, y: Double, candidates: () -> S
    ) -> UInt32 {
        var best = -1
        var bestFallback = -1
        for m in members {
            let e = Int(m)
            if entries[e].layer == .fallback {
                if bestFallback < 0 || precedes(e, bestFallback) { bestFallback = e }
            } else if best < 0 || precedes(e, best) {
                best = e
            }
        }
        if best >= 0 { return UInt32(best + 1) }
        if snapMetres > 0 {
            let cosLat = cos(y * .pi / 180)
            var bestDistance = Double.infinity
            var nearest = -1
            for k in candidates() {
                let edge = edges[k]
                let e = Int(edge.entry)
                guard entries[e].layer != .fallback else { continue }
                let d = Predicates.distanceMetres(edge, x, y, cosLat: cosLat)
                if d <= snapMetres && (d < bestDistance || (d == bestDistance && precedes(e, nearest))) {
                    bestDistance = d
                    nearest = e
                }
            }
            if nearest >= 0 { return UInt32(nearest + 1) | Self.snappedFlag }
        }
        return bestFallback >= 0 ? UInt32(bestFallback + 1) : 0
    }

    /// Deterministic order of polygon sets: layer, then AGS, then position in the file.
    @inline(__always)
    func precedes(_ a: Int, _ b: Int) -> Bool { Self.precedes(a, b, in: entries) }

    @inline(__always)
    static func precedes(_ a: Int, _ b: Int, in entries: [IndexEntry]) -> Bool {
        let ea = entries[a], eb = entries[b]
        if ea.layer != eb.layer { return ea.layer.rawValue < eb.layer.rawValue }
        if ea.agsNumber != eb.agsNumber { return ea.agsNumber < eb.agsNumber }
        return a < b
    }

    /// Brute force: even-odd test of every polygon set, the same rules as the grid.
    func scan(x: Double, y: Double) -> UInt32 {
        var members: [UInt32] = []
        for (i, entry) in entries.enumerated() {
            guard x >= entry.minX, x <= entry.maxX, y >= entry.minY, y <= entry.maxY else { continue }
            var inside = false
            for k in entry.firstEdge..<(entry.firstEdge + entry.edgeCount) {
                let e = edges[k]
                if Predicates.straddles(e, y) && x < Predicates.crossingX(e, y) { inside.toggle() }
            }
            if inside { members.append(UInt32(i)) }
        }
        // Snap candidates: polygon sets whose box, grown by the snap distance, holds the point.
        let mx = snapMetres / (Predicates.metresPerDegree * cos(y * .pi / 180)) * 1.01 + 1e-9
        let my = snapMetres / Predicates.metresPerDegree * 1.01 + 1e-9
        return members.withUnsafeBufferPointer { buf in
            decide(members: buf, x: x, y: y) {
                entries.lazy
                    .filter { x >= $0.minX - mx && x <= $0.maxX + mx && y >= $0.minY - my && y <= $0.maxY + my }
                    .flatMap { $0.firstEdge..<($0.firstEdge + $0.edgeCount) }
            }
        }
    }
}
