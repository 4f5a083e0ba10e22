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
    convenience init(raw: [RawEntry], snapMetres: Double, targetCellDegrees: Double = 0.0045) throws(GeometryError) {
        guard !raw.isEmpty else { throw .noFeatures }
        guard raw.count <= Self.maxEntries else {
            throw .corruptBundle("\(raw.count) polygon sets, at most \(Self.maxEntries) are supported")
        }

        // Districts: unique AGS; the name comes from the lowest layer that has it.
        var nameByAGS: [String: (Layer, String)] = [:]
        for r in raw {
            if let have = nameByAGS[r.ags], have.0.rawValue <= r.layer.rawValue { continue }
            nameByAGS[r.ags] = (r.layer, r.name)
        }
        let districts = nameByAGS.map { District(ags: $0.key, name: $0.value.1) }.sorted()
        var districtByAGS: [String: Int] = [:]
        for (i, d) in districts.enumerated() { districtByAGS[d.ags] = i }

        // Edges, grouped by polygon set.
        var edges: [Edge] = []
        edges.reserveCapacity(raw.reduce(0) { $0 + $1.rings.reduce(0) { $0 + $1.count } })
        var entries: [IndexEntry] = []
        var gMinX = Double.infinity, gMinY = Double.infinity, gMaxX = -Double.infinity, gMaxY = -Double.infinity
        for (i, r) in raw.enumerated() {
            let first = edges.count
            var minX = Double.infinity, minY = Double.infinity, maxX = -Double.infinity, maxY = -Double.infinity
            for ring in r.rings where ring.count >= 2 {
                var prev = ring[ring.count - 1]
                for p in ring {
                    edges.append(Edge(x1: prev.x, y1: prev.y, x2: p.x, y2: p.y, entry: UInt32(i)))
                    prev = p
                    minX = min(minX, p.x); maxX = max(maxX, p.x)
                    minY = min(minY, p.y); maxY = max(maxY, p.y)
                }
            }
            entries.append(IndexEntry(
                district: districtByAGS[r.ags]!, layer: r.layer, ags: r.ags,
                minX: minX, minY: minY, maxX: maxX, maxY: maxY, firstEdge: first, edgeCount: edges.count - first))
            gMinX = min(gMinX, minX); gMaxX = max(gMaxX, maxX)
            gMinY = min(gMinY, minY); gMaxY = max(gMaxY, maxY)
        }
        guard !edges.isEmpty, gMinX.isFinite else { throw .noFeatures }

        // Margins: the snap distance in degrees, at the worst (highest) latitude, plus slack for rounding.
        let worstCos = cos(min(89.0, max(abs(gMinY), abs(gMaxY))) * .pi / 180)
        let my = snapMetres / Predicates.metresPerDegree * 1.01 + 1e-7
        let mx = snapMetres / (Predicates.metresPerDegree * worstCos) * 1.01 + 1e-7

        // Grid over the geometry plus one margin and a cell of slack; at most ~4M cells.
        let midCos = cos((gMinY + gMaxY) / 2 * .pi / 180)
        let spanX = gMaxX - gMinX + 2 * mx, spanY = gMaxY - gMinY + 2 * my
        var cellH = targetCellDegrees
        var cellW = targetCellDegrees / max(midCos, 0.05)
        let maxCells = 4_000_000.0
        if (spanX / cellW + 1) * (spanY / cellH + 1) > maxCells {
            let scale = ((spanX / cellW + 1) * (spanY / cellH + 1) / maxCells).squareRoot()
            cellW *= scale * 1.01
            cellH *= scale * 1.01
        }
        let grid = Grid(
            minX: gMinX - mx - cellW / 2, minY: gMinY - my - cellH / 2, cellW: cellW, cellH: cellH,
            cols: Int(spanX / cellW) + 2, rows: Int(spanY / cellH) + 2)
        let cols = grid.cols, rows = grid.rows

        // Spread every edge to the cells its margin-grown footprint touches (count, then fill).
        var counts = [UInt32](repeating: 0, count: cols * rows + 1)
        func forEachCell(of e: Edge, _ body: (Int) -> Void) {
            let loY = min(e.y1, e.y2) - my, hiY = max(e.y1, e.y2) + my
            let r0 = max(0, Int(((loY - grid.minY) / cellH).rounded(.down)))
            let r1 = min(rows - 1, Int(((hiY - grid.minY) / cellH).rounded(.down)))
            guard r0 <= r1 else { return }
            for r in r0...r1 {
                // The part of the edge inside this row's band grown by the margin.
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
                let c0 = max(0, Int(((xa - mx - grid.minX) / cellW).rounded(.down)))
                let c1 = min(cols - 1, Int(((xb + mx - grid.minX) / cellW).rounded(.down)))
                guard c0 <= c1 else { continue }
                for c in c0...c1 { body(r * cols + c) }
            }
        }
        for e in edges { forEachCell(of: e) { counts[$0] += 1 } }

        var cells = [UInt32](repeating: 0, count: cols * rows)
        var borderStart: [UInt32] = [0]
        var borderOfCell = [Int32](repeating: -1, count: cols * rows)
        var total: UInt32 = 0
        for i in 0..<(cols * rows) where counts[i] > 0 {
            borderOfCell[i] = Int32(borderStart.count - 1)
            cells[i] = Self.borderFlag | UInt32(borderStart.count - 1)
            total += counts[i]
            borderStart.append(total)
        }
        var fill = [UInt32](borderStart.dropLast())
        var borderEdges = [UInt32](repeating: 0, count: Int(total))
        for (k, e) in edges.enumerated() {
            forEachCell(of: e) { cell in
                let b = Int(borderOfCell[cell])
                borderEdges[Int(fill[b])] = UInt32(k)
                fill[b] += 1
            }
        }

        // Pure cells: the district set at the cell centre, from the crossings of the row's centre line.
        var rowCount = [Int](repeating: 0, count: rows + 1)
        func rowsCrossed(_ e: Edge) -> ClosedRange<Int>? {
            let lo = min(e.y1, e.y2), hi = max(e.y1, e.y2)
            let r0 = max(0, Int(((lo - grid.minY) / cellH - 0.5).rounded(.down)))
            let r1 = min(rows - 1, Int(((hi - grid.minY) / cellH - 0.5).rounded(.up)))
            return r0 <= r1 ? r0...r1 : nil
        }
        for e in edges { if let rs = rowsCrossed(e) { for r in rs { rowCount[r + 1] += 1 } } }
        for r in 0..<rows { rowCount[r + 1] += rowCount[r] }
        var rowFill = rowCount
        var rowEdges = [UInt32](repeating: 0, count: rowCount[rows])
        for (k, e) in edges.enumerated() {
            if let rs = rowsCrossed(e) {
                for r in rs {
                    rowEdges[rowFill[r]] = UInt32(k)
                    rowFill[r] += 1
                }
            }
        }

        var sets: [[UInt32]] = [[]]
        var setIDs: [[UInt32]: Int] = [[]: 0]
        var crossings: [(x: Double, entry: UInt32)] = []
        var parity = [Bool](repeating: false, count: entries.count)
        var current: [UInt32] = []
        for r in 0..<rows {
            let yc = grid.minY + (Double(r) + 0.5) * cellH
            crossings.removeAll(keepingCapacity: true)
            for k in rowCount[r]..<rowCount[r + 1] {
                let e = edges[Int(rowEdges[k])]
                if Predicates.straddles(e, yc) { crossings.append((Predicates.crossingX(e, yc), e.entry)) }
            }
            crossings.sort { $0.x < $1.x }
            var next = 0
            var setID = 0
            var dirty = false
            let base = r * cols
            for c in 0..<cols {
                let xc = grid.minX + (Double(c) + 0.5) * cellW
                while next < crossings.count && crossings[next].x < xc {
                    let e = crossings[next].entry
                    parity[Int(e)].toggle()
                    if parity[Int(e)] {
                        current.insert(e, at: current.firstIndex { $0 > e } ?? current.count)
                    } else {
                        current.removeAll { $0 == e }
                    }
                    next += 1
                    dirty = true
                }
                guard cells[base + c] & Self.borderFlag == 0 else { continue }
                if dirty {
                    if let id = setIDs[current] {
                        setID = id
                    } else {
                        guard sets.count <= Self.maxSets else {
                            throw .corruptBundle("more than \(Self.maxSets) distinct overlap sets")
                        }
                        setID = sets.count
                        setIDs[current] = setID
                        sets.append(current)
                    }
                    dirty = false
                }
                cells[base + c] = UInt32(setID) << 16
            }
            // Every ring crosses a line an even number of times, so parity is all false again here.
            while next < crossings.count {
                parity[Int(crossings[next].entry)].toggle()
                next += 1
            }
            current.removeAll(keepingCapacity: true)
        }

        // A pure cell's answer: no border is within the snap distance, so only containment counts.
        let setAnswers = sets.map { set -> UInt32 in
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
        for i in cells.indices where cells[i] & Self.borderFlag == 0 {
            cells[i] |= setAnswers[Int(cells[i] >> 16)]
        }

        self.init(
            districts: districts, snapMetres: snapMetres, entries: entries, edges: edges, grid: grid,
            cells: cells, borderStart: borderStart, borderEdges: borderEdges, sets: sets,
            setAnswers: setAnswers, districtByAGS: districtByAGS)
    }
}
