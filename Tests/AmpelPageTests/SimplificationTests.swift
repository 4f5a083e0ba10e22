import Foundation
import AmpelPage
import Testing

@Suite("Douglas-Peucker simplification")
struct SimplificationTests {
    @Test("points on a straight line go, a corner beyond the tolerance stays")
    func collinearAndCorner() {
        let line = (0...10).map { PlanePoint(x: Double($0), y: 0) } + [PlanePoint(x: 10, y: 5)]
        #expect(Simplification.line(line, tolerance: 0.1) == [PlanePoint(x: 0, y: 0), PlanePoint(x: 10, y: 0), PlanePoint(x: 10, y: 5)])
        let bump = [PlanePoint(x: 0, y: 0), PlanePoint(x: 5, y: 0.4), PlanePoint(x: 10, y: 0)]
        #expect(Simplification.line(bump, tolerance: 0.5).count == 2)
        #expect(Simplification.line(bump, tolerance: 0.3).count == 3)
    }

    @Test("every dropped vertex of a ring lies within the tolerance of the simplified ring")
    func ringWithinTolerance() {
        // A wobbly circle: 2,000 vertices.
        let ring = (0..<2000).map { i -> PlanePoint in
            let a = Double(i) / 2000 * 2 * .pi
            let r = 100 + 3 * ((i * 7919) % 97 == 0 ? 1.0 : 0.0) + 0.1 * Double((i * 31) % 5)
            return PlanePoint(x: r * cos(a), y: r * sin(a))
        }
        let tolerance = 0.6
        let kept = Simplification.ring(ring, tolerance: tolerance)
        #expect(kept.count >= 3)
        #expect(kept.count < ring.count / 4)
        for p in ring {
            let nearest = kept.indices.map { i in distance(p, kept[i], kept[(i + 1) % kept.count]) }.min() ?? .infinity
            #expect(nearest <= tolerance + 1e-9)
        }
    }

    @Test("a sliver thinner than the tolerance keeps three vertices")
    func sliverKeepsAnArea() {
        let sliver = [PlanePoint(x: 0, y: 0), PlanePoint(x: 50, y: 0.01), PlanePoint(x: 100, y: 0), PlanePoint(x: 50, y: -0.01)]
        #expect(Simplification.ring(sliver, tolerance: 1).count == 3)
    }

    private func distance(_ p: PlanePoint, _ a: PlanePoint, _ b: PlanePoint) -> Double {
        let dx = b.x - a.x, dy = b.y - a.y
        let t = max(0, min(1, ((p.x - a.x) * dx + (p.y - a.y) * dy) / (dx * dx + dy * dy)))
        let x = a.x + t * dx - p.x, y = a.y + t * dy - p.y
        return (x * x + y * y).squareRoot()
    }
}
