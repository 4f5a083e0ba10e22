@testable import AmpelGeo
import Testing

/// The grid must give exactly the brute-force answer: same polygons, same rules, same floats.
@Suite struct PropertyTests {
    let index: DistrictIndex

    init() throws {
        index = try DistrictIndex.bundled()
    }

    @Test func agreesWithScanOnRandomPointsInGermanysBox() throws {
        var rng = SeededGenerator(seed: 20201015)
        var inside = 0, disagreements: [String] = []
        for _ in 0..<100_000 {
            let lat = Double.random(in: 47.27...55.06, using: &rng)
            let lon = Double.random(in: 5.86...15.05, using: &rng)
            let fast = try index.lookup(latitude: lat, longitude: lon)
            let slow = try index.lookupByScan(latitude: lat, longitude: lon)
            if fast != nil { inside += 1 }
            if fast != slow && disagreements.count < 10 {
                disagreements.append("\(lat),\(lon): index \(fast?.description ?? "nil") scan \(slow?.description ?? "nil")")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements)")
        // Germany fills roughly 60 % of its bounding box: a broken index answering nil everywhere fails here.
        #expect(inside > 50_000 && inside < 70_000)
    }

    /// Random points within ~40 m of a random border vertex: nearly all take the border path,
    /// many fall into the VG250 slivers, gaps and the VG250/VG1000 seam.
    @Test func agreesWithScanNearBorders() throws {
        var rng = SeededGenerator(seed: 96)
        var kinds: [DistrictHit.Match: Int] = [:]
        var disagreements: [String] = []
        for _ in 0..<20_000 {
            let edge = index.edges[Int.random(in: 0..<index.edges.count, using: &rng)]
            let lat = edge.y1 + Double.random(in: -0.0004...0.0004, using: &rng)
            let lon = edge.x1 + Double.random(in: -0.0006...0.0006, using: &rng)
            let fast = try index.lookup(latitude: lat, longitude: lon)
            let slow = try index.lookupByScan(latitude: lat, longitude: lon)
            if let fast { kinds[fast.match, default: 0] += 1 }
            if fast != slow && disagreements.count < 10 {
                disagreements.append("\(lat),\(lon): index \(fast?.description ?? "nil") scan \(slow?.description ?? "nil")")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements)")
        // The gap and seam rules are really exercised, not just the plain containment.
        #expect(kinds[.nearest, default: 0] > 0)
        #expect(kinds[.seamFallback, default: 0] > 0)
    }

    /// Every vertex and edge midpoint of the geometry itself: answered deterministically, never nil
    /// inside Germany (each such point lies on some district's border), and as the scan answers.
    @Test func verticesAndEdgeMidpoints() throws {
        var rng = SeededGenerator(seed: 7)
        var disagreements: [String] = []
        for _ in 0..<5_000 {
            let e = index.edges[Int.random(in: 0..<index.edges.count, using: &rng)]
            for (lon, lat) in [(e.x1, e.y1), ((e.x1 + e.x2) / 2, (e.y1 + e.y2) / 2)] {
                let fast = try index.lookup(latitude: lat, longitude: lon)
                let again = try index.lookup(latitude: lat, longitude: lon)
                let slow = try index.lookupByScan(latitude: lat, longitude: lon)
                if fast == nil || fast != again || fast != slow, disagreements.count < 10 {
                    disagreements.append("\(lat),\(lon): \(String(describing: fast)) \(String(describing: slow))")
                }
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements)")
    }
}
