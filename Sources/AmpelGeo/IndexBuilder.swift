import Foundation

extension DistrictIndex {
    /// Builds the grid over polygon sets; all the validation happened in the readers.
    ///
    /// - Parameters:
    ///   - raw: polygon sets; several may share an AGS (one per layer).
    ///   - snapMetres: gap tolerance; also the margin by which edges are spread to cells, so a
    ///     pure cell is guaranteed to be farther than this from every border.
    ///   - targetCellDegrees: cell height in degrees of latitude; the width is chosen so cells
    ///     are roughly square on the ground.
    convenience init(raw: [RawEntry], snapMetres: Double, targetCellDegrees: Double = 0.006) throws(GeometryError) {
        guard !raw.isEmpty else { throw .noFeatures }
        guard raw.count <= Self.maxEntries else {
            throw .corruptBundle("\(raw.count) polygon sets, at most \(Self.maxEntries) are supported")
        }
        let (districts, districtByAGS) = Self.districts(of: raw)
        let (edges, entries, bounds) = Self.edges(of: raw, districtByAGS: districtByAGS)
        guard !edges.isEmpty, bounds.minX.isFinite else { throw .noFeatures }
        let (grid, mx, my) = Self.grid(over: bounds, snapMetres: snapMetres, targetCellDegrees: targetCellDegrees)
        var (cells, borderStart, borderEdges) = Self.borderCells(edges, grid: grid, mx: mx, my: my)
        let sets = try Self.fillPureCells(&cells, edges: edges, entries: entries, grid: grid)
        self.init(
            districts: districts, snapMetres: snapMetres, entries: entries, edges: edges, grid: grid,
            cells: cells, borderStart: borderStart, borderEdges: borderEdges, sets: sets,
            districtByAGS: districtByAGS)
    }

    /// Unique AGS, sorted; the name comes from the lowest layer that has it.
    static func districts(of raw: [RawEntry]) -> ([District], [String: Int]) {
        var nameByAGS: [String: (Layer, String)] = [:]
        for r in raw {
            if let have = nameByAGS[r.ags], have.0.rawValue <= r.layer.rawValue { continue }
            nameByAGS[r.ags] = (r.layer, r.name)
        }
        let districts = nameByAGS.map { District(ags: $0.key, name: $0.value.1) }.sorted()
        var districtByAGS: [String: Int] = [:]
        for (i, d) in districts.enumerated() { districtByAGS[d.ags] = i }
        return (districts, districtByAGS)
    }

    typealias Bounds = (minX: Double, minY: Double, maxX: Double, maxY: Double)

    /// The edges grouped by polygon set, an entry per set with its bounding box, and the bounds of all.
    static func edges(of raw: [RawEntry], districtByAGS: [String: Int]) -> (EdgeStore, [IndexEntry], Bounds) {
        var edges = EdgeStore()
        edges.reserveCapacity(edges: raw.reduce(0) { $0 + $1.rings.reduce(0) { $0 + $1.count } })
        var entries: [IndexEntry] = []
        var all: Bounds = (.infinity, .infinity, -.infinity, -.infinity)
        for (i, r) in raw.enumerated() {
            let first = edges.count
            var minX = Double.infinity, minY = Double.infinity, maxX = -Double.infinity, maxY = -Double.infinity
            for ring in r.rings where ring.count >= 2 {
                edges.appendRing(ring, entry: UInt32(i))
                for p in ring {
                    minX = min(minX, p.x); maxX = max(maxX, p.x)
                    minY = min(minY, p.y); maxY = max(maxY, p.y)
                }
            }
            entries.append(IndexEntry(
                district: districtByAGS[r.ags]!, layer: r.layer, agsNumber: UInt32(r.ags.prefix(9)) ?? 0,
                minX: minX, minY: minY, maxX: maxX, maxY: maxY, firstEdge: first, edgeCount: edges.count - first))
            all = (min(all.minX, minX), min(all.minY, minY), max(all.maxX, maxX), max(all.maxY, maxY))
        }
        return (edges, entries, all)
    }

    /// The grid over the geometry plus one margin and a cell of slack (at most ~4M cells), and
    /// the margins: the snap distance in degrees, at the worst (highest) latitude, plus slack for rounding.
    static func grid(over bounds: Bounds, snapMetres: Double, targetCellDegrees: Double) -> (Grid, mx: Double, my: Double) {
        let worstCos = cos(min(89.0, max(abs(bounds.minY), abs(bounds.maxY))) * .pi / 180)
        let my = snapMetres / Predicates.metresPerDegree * 1.01 + 1e-7
        let mx = snapMetres / (Predicates.metresPerDegree * worstCos) * 1.01 + 1e-7
        let midCos = cos((bounds.minY + bounds.maxY) / 2 * .pi / 180)
        let spanX = bounds.maxX - bounds.minX + 2 * mx, spanY = bounds.maxY - bounds.minY + 2 * my
        var cellH = targetCellDegrees
        var cellW = targetCellDegrees / max(midCos, 0.05)
        let maxCells = 4_000_000.0
        if (spanX / cellW + 1) * (spanY / cellH + 1) > maxCells {
            let scale = ((spanX / cellW + 1) * (spanY / cellH + 1) / maxCells).squareRoot()
            cellW *= scale * 1.01
            cellH *= scale * 1.01
        }
        let grid = Grid(
            minX: bounds.minX - mx - cellW / 2, minY: bounds.minY - my - cellH / 2, cellW: cellW, cellH: cellH,
            cols: Int(spanX / cellW) + 2, rows: Int(spanY / cellH) + 2, invW: 1 / cellW, invH: 1 / cellH)
        return (grid, mx, my)
    }

    /// Spreads every edge to the cells its margin-grown footprint touches ((cell, edge) pairs,
    /// then a counting sort by cell): each border cell gets its flag and the start of its edge
    /// list; the other cells stay 0 (pure, filled by ``fillPureCells(_:edges:entries:grid:)``).
    static func borderCells(_ edges: EdgeStore, grid: Grid, mx: Double, my: Double) -> ([UInt32], [UInt32], [UInt32]) {
        var pairs: [UInt64] = []
        pairs.reserveCapacity(edges.count * 3)
        for k in edges.indices { Self.appendCells(of: edges[k], index: k, grid: grid, mx: mx, my: my, into: &pairs) }
        let cellCount = grid.cols * grid.rows
        var cells = [UInt32](repeating: 0, count: cellCount)
        var borderStart: [UInt32] = [0]
        var borderEdges = [UInt32](repeating: 0, count: pairs.count)
        cells.withUnsafeMutableBufferPointer { cells in
            // Count into the cell array itself, then turn counts into border indices: no extra
            // cell-sized arrays to allocate and fault in.
            for p in pairs { cells[Int(p >> 32)] &+= 1 }
            var total: UInt32 = 0
            for i in 0..<cellCount where cells[i] > 0 {
                total &+= cells[i]
                cells[i] = Self.borderFlag | UInt32(borderStart.count - 1)
                borderStart.append(total)
            }
            // Pairs were appended in edge order, so each cell's list stays in edge order.
            var cursor = [UInt32](borderStart.dropLast())
            borderEdges.withUnsafeMutableBufferPointer { out in
                cursor.withUnsafeMutableBufferPointer { cursor in
                    for p in pairs {
                        let b = Int(cells[Int(p >> 32)] & ~Self.borderFlag)
                        out[Int(cursor[b])] = UInt32(truncatingIfNeeded: p)
                        cursor[b] &+= 1
                    }
                }
            }
        }
        return (cells, borderStart, borderEdges)
    }

    /// The edges that cross each row's centre line, as row starts into one list (a counting sort).
    static func rowEdges(_ edges: EdgeStore, grid: Grid) -> (start: [Int], edges: [UInt32]) {
        var rowPairs: [UInt64] = []
        rowPairs.reserveCapacity(edges.count * 2)
        for k in edges.indices {
            let e = edges[k]
            let lo = min(e.y1, e.y2), hi = max(e.y1, e.y2)
            let r0 = max(0, Int(((lo - grid.minY) / grid.cellH - 0.5).rounded(.down)))
            let r1 = min(grid.rows - 1, Int(((hi - grid.minY) / grid.cellH - 0.5).rounded(.up)))
            guard r0 <= r1 else { continue }
            for r in r0...r1 { rowPairs.append(UInt64(r) << 32 | UInt64(k)) }
        }
        var rowStart = [Int](repeating: 0, count: grid.rows + 1)
        for p in rowPairs { rowStart[Int(p >> 32) + 1] += 1 }
        for r in 0..<grid.rows { rowStart[r + 1] += rowStart[r] }
        var rowEdges = [UInt32](repeating: 0, count: rowPairs.count)
        var slot = rowStart
        for p in rowPairs {
            let r = Int(p >> 32)
            rowEdges[slot[r]] = UInt32(truncatingIfNeeded: p)
            slot[r] += 1
        }
        return (rowStart, rowEdges)
    }

    /// A pure cell's answer: no border is within the snap distance, so only containment counts.
    static func pureAnswer(_ set: [UInt32], entries: [IndexEntry]) -> UInt32 {
        var best = -1, bestFallback = -1
        for m in set {
            let e = Int(m)
            if entries[e].layer == .fallback {
                if bestFallback < 0 || Self.precedes(e, bestFallback, in: entries) { bestFallback = e }
            } else if best < 0 || Self.precedes(e, best, in: entries) {
                best = e
            }
        }
        let winner = best >= 0 ? best : bestFallback
        return winner >= 0 ? UInt32(winner + 1) : 0
    }

    /// Pure cells: the district set at the cell centre, from the crossings of the row's centre
    /// line, sweeping each row. Returns the distinct sets; each pure cell holds its set's id and answer.
    ///
    /// Sets are interned by a Zobrist hash (XOR of a random key per entry), kept up to date on
    /// every toggle, so a row sweep costs no hashing of arrays.
    static func fillPureCells(_ cells: inout [UInt32], edges: EdgeStore, entries: [IndexEntry], grid: Grid) throws(GeometryError) -> [[UInt32]] {
        let (rowStart, rowEdges) = Self.rowEdges(edges, grid: grid)
        var keyRNG = Zobrist(seed: 0x5EED)
        let keys = (0..<entries.count).map { _ in keyRNG.next() }
        var sets: [[UInt32]] = [[]]
        var setIDs: [UInt64: [Int]] = [0: [0]]
        var setAnswers: [UInt32] = [0]
        var crossings: [(x: Double, entry: UInt32)] = []
        var current: [UInt32] = []
        let cols = grid.cols
        try cells.withUnsafeMutableBufferPointer { (cells) throws(GeometryError) in
            for r in 0..<grid.rows {
                let yc = grid.minY + (Double(r) + 0.5) * grid.cellH
                crossings.removeAll(keepingCapacity: true)
                for k in rowStart[r]..<rowStart[r + 1] {
                    let e = edges[Int(rowEdges[k])]
                    if Predicates.straddles(e, yc) { crossings.append((Predicates.crossingX(e, yc), e.entry)) }
                }
                crossings.sort { $0.x < $1.x }
                var next = 0
                var setID = 0
                var hash: UInt64 = 0
                var dirty = false
                let base = r * cols
                // Only pure cells need the set; jump from pure cell to pure cell.
                for c in 0..<cols where cells[base + c] & Self.borderFlag == 0 {
                    let xc = grid.minX + (Double(c) + 0.5) * grid.cellW
                    while next < crossings.count && crossings[next].x < xc {
                        let e = crossings[next].entry
                        hash ^= keys[Int(e)]
                        if let i = current.firstIndex(of: e) { current.remove(at: i) } else { current.append(e) }
                        next += 1
                        dirty = true
                    }
                    if dirty {
                        current.sort()
                        if let id = setIDs[hash]?.first(where: { sets[$0] == current }) {
                            setID = id
                        } else {
                            guard sets.count <= Self.maxSets else {
                                throw .corruptBundle("more than \(Self.maxSets) distinct overlap sets")
                            }
                            setID = sets.count
                            setIDs[hash, default: []].append(setID)
                            sets.append(current)
                            setAnswers.append(Self.pureAnswer(current, entries: entries))
                        }
                        dirty = false
                    }
                    cells[base + c] = UInt32(setID) << 16 | setAnswers[setID]
                }
                current.removeAll(keepingCapacity: true)
            }
        }
        return sets
    }

    /// Appends `(cell << 32 | edge)` for every cell the edge's footprint, grown by the margins, touches.
    ///
    /// Per row band (grown by `my`), the part of the edge inside the band is clipped, and its
    /// x-range grown by `mx`: conservative, so every cell within the snap distance of the edge lists it.
    static func appendCells(of e: Edge, index: Int, grid: Grid, mx: Double, my: Double, into pairs: inout [UInt64]) {
        let loY = min(e.y1, e.y2) - my, hiY = max(e.y1, e.y2) + my
        let r0 = max(0, Int(((loY - grid.minY) / grid.cellH).rounded(.down)))
        let r1 = min(grid.rows - 1, Int(((hiY - grid.minY) / grid.cellH).rounded(.down)))
        guard r0 <= r1 else { return }
        for r in r0...r1 {
            let bandLo = grid.y0(r) - my, bandHi = grid.y0(r + 1) + my
            var xa: Double, xb: Double
            if e.y1 == e.y2 {
                xa = min(e.x1, e.x2); xb = max(e.x1, e.x2)
            } else {
                var t0 = (bandLo - e.y1) / (e.y2 - e.y1)
                var t1 = (bandHi - e.y1) / (e.y2 - e.y1)
                if t0 > t1 { swap(&t0, &t1) }
                t0 = max(0, t0); t1 = min(1, t1)
                if t0 > t1 { continue }
                let xs0 = e.x1 + t0 * (e.x2 - e.x1), xs1 = e.x1 + t1 * (e.x2 - e.x1)
                xa = min(xs0, xs1); xb = max(xs0, xs1)
            }
            let c0 = max(0, Int(((xa - mx - grid.minX) / grid.cellW).rounded(.down)))
            let c1 = min(grid.cols - 1, Int(((xb + mx - grid.minX) / grid.cellW).rounded(.down)))
            guard c0 <= c1 else { continue }
            let base = UInt64(r * grid.cols)
            for c in c0...c1 { pairs.append((base + UInt64(c)) << 32 | UInt64(index)) }
        }
    }
}

/// SplitMix64: a small, seeded generator. The index uses it for reproducible interning keys;
/// benchmarks and tests use it so every run sees the same points.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

typealias Zobrist = SplitMix64
