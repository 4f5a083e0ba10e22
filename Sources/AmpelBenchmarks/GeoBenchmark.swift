import AmpelGeo
// `timespec` belongs to CDispatch once AmpelDaemon (through swift-nio) is linked in.
import CDispatch
// ... and to CoreFoundation once the test support (through Foundation) is linked in as well.
import CoreFoundation
import Foundation

/// `AmpelBenchmarks geo [--points N] [--scan-points N] [--out DIR]`: the position lookup, measured.
///
/// Prints load time, index memory, and lookups per second of the grid index and of the naive
/// scan over every polygon, on seeded random points. Writes the points (`points-*.f64`, little
/// endian longitude/latitude pairs) and 1M `lat,lon` lines (`resolve-input.txt`) to DIR, so
/// Benchmarks/geo/shapely_bench.py and the `ampel resolve` timing use exactly the same input.
enum GeoBenchmark {
    /// Runs the benchmark and exits: 0 on success, 1 with the error on stderr.
    static func main(_ arguments: [String]) -> Never {
        do {
            try run(arguments)
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("geo benchmark: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run(_ arguments: [String]) throws {
        var points = 2_000_000, scanPoints = 20_000
        var out = URL(fileURLWithPath: "benchmarks-out/geo")
        var vg1000: String?
        var i = 0
        while i < arguments.count {
            let value = i + 1 < arguments.count ? arguments[i + 1] : ""
            switch arguments[i] {
            case "--points": points = Int(value) ?? points
            case "--scan-points": scanPoints = Int(value) ?? scanPoints
            case "--out": out = URL(fileURLWithPath: value)
            case "--vg1000": vg1000 = value
            default: throw BenchmarkError("unknown argument \(arguments[i])")
            }
            i += 2
        }
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)

        // Load: read the bundled file and build the grid, as DistrictIndex.bundled() does.
        let rssBefore = residentBytes()
        let loadStart = CPUClock.now()
        let index = try DistrictIndex.bundled()
        let firstLoad = CPUClock.now() - loadStart
        let rssAfter = residentBytes()
        let data = try Data(contentsOf: bundledURL())
        var loads: [Duration] = []
        for _ in 0..<5 {
            let t = CPUClock.now()
            _ = try DistrictIndex(packed: data)
            loads.append(CPUClock.now() - t)
        }
        let s = index.statistics
        print("geometry: \(s.districts) districts, \(s.polygonSets) polygon sets, \(s.edges) edges, file \(data.count / 1024) KiB")
        print("grid: \(s.columns) x \(s.rows) cells, \(s.borderCells) border cells (\(pct(s.borderCells, s.cells))), \(s.borderEdgeReferences) edge references")
        print("load (first, incl. file read): \(ms(firstLoad)); build from bytes, best of 5: \(ms(loads.min()!)), median \(ms(loads.sorted()[2]))")
        print("memory: index arrays \(mib(s.memoryBytes)); process RSS growth on first load \(mib(rssAfter - rssBefore))")

        var rng = SplitMix(seed: 20201015)
        let germany = (0..<points).map { _ in
            (lon: Double.random(in: 5.86...15.05, using: &rng), lat: Double.random(in: 47.27...55.06, using: &rng))
        }
        let bavaria = (0..<points).map { _ in
            (lon: Double.random(in: 8.97...13.84, using: &rng), lat: Double.random(in: 47.27...50.57, using: &rng))
        }
        try write(germany, to: out.appendingPathComponent("points-germany.f64"))
        try write(bavaria, to: out.appendingPathComponent("points-bavaria.f64"))
        var lines = ""
        lines.reserveCapacity(1_000_000 * 20)
        // Six decimals (~0.1 m), as GPS devices and OwnTracks send them.
        for p in germany.prefix(1_000_000) { lines += String(format: "%.6f,%.6f\n", p.lat, p.lon) }
        try Data(lines.utf8).write(to: out.appendingPathComponent("resolve-input.txt"))

        if let vg1000 { try compare(index, withGeoJSON: vg1000, points: bavaria) }

        for (name, set) in [("germany-bbox", germany), ("bavaria-bbox", bavaria)] {
            var found = 0
            let t0 = CPUClock.now()
            for p in set where try index.lookupDistrictIndex(latitude: p.lat, longitude: p.lon) != nil { found += 1 }
            let grid = CPUClock.now() - t0

            var named = 0
            let t1 = CPUClock.now()
            for p in set {
                if let hit = try index.lookup(latitude: p.lat, longitude: p.lon) { named &+= hit.ags.utf8.count }
            }
            let hits = CPUClock.now() - t1

            let sub = set.prefix(scanPoints)
            var scanFound = 0
            let t2 = CPUClock.now()
            for p in sub where try index.lookupByScan(latitude: p.lat, longitude: p.lon) != nil { scanFound += 1 }
            let scan = CPUClock.now() - t2

            print("\(name): \(set.count) points, \(pct(found, set.count)) in a district")
            print("  (a) index lookupDistrictIndex: \(rate(set.count, grid)) lookups/s")
            print("  (a) index lookup -> DistrictHit: \(rate(set.count, hits)) lookups/s (checksum \(named))")
            print("  (b) naive scan of all polygons: \(rate(sub.count, scan)) lookups/s (\(sub.count) points, \(scanFound) found)")
        }
    }

    /// How often the bundled geometry (VG250 in Bavaria) and plain VG1000 disagree: the price of VG1000.
    static func compare(_ index: DistrictIndex, withGeoJSON path: String, points: [(lon: Double, lat: Double)]) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let t = CPUClock.now()
        let other = try DistrictIndex(geoJSON: data)
        print("--geometry \((path as NSString).lastPathComponent) (\(data.count / 1024) KiB GeoJSON): parse + build \(ms(CPUClock.now() - t))")
        var differ = 0, onlyBundled = 0, onlyOther = 0, bothBavarian = 0
        for p in points {
            let a = try index.lookupAGS(latitude: p.lat, longitude: p.lon)
            let b = try other.lookupAGS(latitude: p.lat, longitude: p.lon)
            guard a != b else { continue }
            differ += 1
            if b == nil { onlyBundled += 1 } else if a == nil { onlyOther += 1 }
            if a?.hasPrefix("09") == true || b?.hasPrefix("09") == true { bothBavarian += 1 }
        }
        print("  bundled vs plain VG1000 on \(points.count) points in Bavaria's box: \(differ) differ (\(pct(differ, points.count))); "
            + "\(onlyBundled) only bundled has a district, \(onlyOther) only VG1000 has one; \(bothBavarian) involve a Bavarian district")
    }

    static func bundledURL() throws -> URL {
        // The same resource DistrictIndex.bundled() reads, found through the AmpelGeo bundle next to this binary.
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let candidates = [
            exe.appendingPathComponent("Ampel_AmpelGeo.resources/geometry/districts.ampelgeo"),
            exe.appendingPathComponent("Ampel_AmpelGeo.bundle/Contents/Resources/geometry/districts.ampelgeo"),
            URL(fileURLWithPath: "Sources/AmpelGeo/Resources/geometry/districts.ampelgeo"),
        ]
        guard let url = candidates.first(where: { FileManager.default.fileExists(atPath: $0.path) }) else {
            throw BenchmarkError("districts.ampelgeo not found")
        }
        return url
    }

    static func write(_ points: [(lon: Double, lat: Double)], to url: URL) throws {
        var bytes = [UInt8]()
        bytes.reserveCapacity(points.count * 16)
        for p in points {
            withUnsafeBytes(of: p.lon.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: p.lat.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }
        try Data(bytes).write(to: url)
    }

    /// Resident set size from /proc/self/statm (Linux); 0 elsewhere.
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * 4096
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
    static func ms(_ d: Duration) -> String { String(format: "%.1f ms", seconds(d) * 1000) }
    static func mib(_ b: Int) -> String { String(format: "%.1f MiB", Double(b) / 1_048_576) }
    static func pct(_ a: Int, _ b: Int) -> String { String(format: "%.1f %%", 100 * Double(a) / Double(max(b, 1))) }
    static func rate(_ n: Int, _ d: Duration) -> String {
        let r = Double(n) / seconds(d)
        return r >= 1e6 ? String(format: "%.2fM", r / 1e6) : String(format: "%.0f", r)
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

typealias SplitMix = SplitMix64

/// Thread CPU time: the machine this runs on is shared, so wall time would measure the neighbours too.
enum CPUClock {
    static func now() -> CPUInstant {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return CPUInstant(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }
}

struct CPUInstant {
    let nanoseconds: Int64
    static func - (lhs: CPUInstant, rhs: CPUInstant) -> Duration { .nanoseconds(lhs.nanoseconds - rhs.nanoseconds) }
}
