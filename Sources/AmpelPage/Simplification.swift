/// A point on the drawing plane (SVG user units, y pointing down).
public struct PlanePoint: Sendable, Hashable {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }
}

/// Douglas-Peucker line simplification.
///
/// Keeps the vertices that stand out from the chord between the kept neighbours by more than
/// `tolerance`; a shape drawn at screen size loses nothing visible at about half a pixel.
public enum Simplification {
    /// The simplified closed ring: a subset of `ring`'s vertices in order, never fewer than
    /// three while the ring has three, so every district keeps an area.
    ///
    /// The ring is split at its first vertex and the vertex farthest from it, and each half is
    /// simplified as an open line: a closed ring has no chord of its own to measure against.
    public static func ring(_ ring: [PlanePoint], tolerance: Double) -> [PlanePoint] {
        guard ring.count > 3 else { return ring }
        var far = 0
        var farDistance = -1.0
        for (i, p) in ring.enumerated() {
            let d = squaredDistance(p, ring[0])
            if d > farDistance { farDistance = d; far = i }
        }
        guard far > 0 else { return Array(ring.prefix(3)) }
        var keep = [Bool](repeating: false, count: ring.count + 1)
        let closed = ring + [ring[0]]
        keep[0] = true
        keep[far] = true
        keep[ring.count] = true
        mark(closed, 0, far, tolerance * tolerance, &keep)
        mark(closed, far, ring.count, tolerance * tolerance, &keep)
        var out: [PlanePoint] = []
        for i in 0..<ring.count where keep[i] { out.append(ring[i]) }
        if out.count < 3 {
            // A sliver thinner than the tolerance: keep its widest triangle so it still shows.
            let third = (1..<ring.count).filter { $0 != far }.max {
                segmentDistanceSquared(ring[$0], ring[0], ring[far]) < segmentDistanceSquared(ring[$1], ring[0], ring[far])
            } ?? 1
            out = [0, far, third].sorted().map { ring[$0] }
        }
        return out
    }

    /// The simplified open line from `line.first` to `line.last`.
    public static func line(_ line: [PlanePoint], tolerance: Double) -> [PlanePoint] {
        guard line.count > 2 else { return line }
        var keep = [Bool](repeating: false, count: line.count)
        keep[0] = true
        keep[line.count - 1] = true
        mark(line, 0, line.count - 1, tolerance * tolerance, &keep)
        return line.indices.filter { keep[$0] }.map { line[$0] }
    }

    /// Marks the vertices strictly between `first` and `last` that the simplification keeps;
    /// an explicit stack instead of recursion, as a VG250 ring has tens of thousands of vertices.
    private static func mark(_ points: [PlanePoint], _ first: Int, _ last: Int, _ toleranceSquared: Double, _ keep: inout [Bool]) {
        var stack = [(first, last)]
        while let (a, b) = stack.popLast() {
            guard b > a + 1 else { continue }
            var worst = a
            var worstDistance = -1.0
            for i in (a + 1)..<b {
                let d = segmentDistanceSquared(points[i], points[a], points[b])
                if d > worstDistance { worstDistance = d; worst = i }
            }
            if worstDistance > toleranceSquared {
                keep[worst] = true
                stack.append((a, worst))
                stack.append((worst, b))
            }
        }
    }

    static func squaredDistance(_ p: PlanePoint, _ q: PlanePoint) -> Double {
        let dx = p.x - q.x, dy = p.y - q.y
        return dx * dx + dy * dy
    }

    /// The squared distance from `p` to the segment `a`-`b` (to `a` when the segment is a point).
    static func segmentDistanceSquared(_ p: PlanePoint, _ a: PlanePoint, _ b: PlanePoint) -> Double {
        let dx = b.x - a.x, dy = b.y - a.y
        let length = dx * dx + dy * dy
        guard length > 0 else { return squaredDistance(p, a) }
        let t = max(0, min(1, ((p.x - a.x) * dx + (p.y - a.y) * dy) / length))
        return squaredDistance(p, PlanePoint(x: a.x + t * dx, y: a.y + t * dy))
    }
}
