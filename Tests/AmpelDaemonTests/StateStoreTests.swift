@testable import AmpelDaemon
import AmpelCore
import AmpelData
import AmpelDomain
import Foundation
import Logging
import Synchronization
import Testing

@Suite("State store and log limiter", .timeLimit(.minutes(1)))
struct StateStoreTests {
    @Test("the state is saved atomically and loaded back; a corrupt file is an error, not an empty start")
    func roundTrip() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = StateStore(directory: dir + "/nested")
        try store.prepare()
        #expect(try store.load() == PersistedState())
        let state = PersistedState(
            devices: ["a/b": DeviceRecord(lat: 48, lon: 11, tst: 5, lang: "de", district: .init(ags: "09162", name: "SK München", state: "Bayern", type: "SK"),
                                          phase: "red", dataDate: "2020-10-15", stale: false)],
            districts: ["09162": "red"])
        try store.save(state)
        #expect(try store.load() == state)
        // Escaping, absent values and many devices survive the streamed writer.
        var many = state
        many.devices["q\"uo\\te/ü"] = DeviceRecord(lat: -0.000001, lon: 179.999999, tst: 0, lang: "de\tAT", district: nil,
                                                   phase: "outside", dataDate: "2020-10-15", stale: true)
        many.devices["bw"] = DeviceRecord(lat: 48.7, lon: 9.1, tst: 1, lang: nil,
                                          district: .init(ags: "08111", name: "Stuttgart \"Mitte\"", state: "Baden-Württemberg", type: nil),
                                          phase: "outside", dataDate: "2020-10-15", stale: false)
        for index in 0..<3000 {
            many.devices["d\(index)"] = DeviceRecord(lat: Double(index) / 1000, lon: 11, tst: index, lang: nil, district: nil,
                                                     phase: "green", dataDate: "2020-10-15", stale: false)
        }
        try store.save(many)
        #expect(try store.load() == many)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory) == ["state.json"])
        // Positions are private: only the daemon's user may read them.
        let mode = try FileManager.default.attributesOfItem(atPath: store.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: store.path))
        #expect(throws: StateStoreError.self) { try store.load() }
    }

    @Test("the stop's write does not wait for the writer thread's write, and the older state never replaces the newer")
    func writeNowOvertakesTheWriterThread() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = StateStore(directory: dir)
        try store.prepare()
        let saver = StateSaver(store: store, logger: Logger(label: "test"))
        // Large enough that its write is still going on when the small one is done; not more:
        // the writer thread is idle-class, and on a machine whose cores are both busy it gets a
        // fraction of a percent of one (200,000 devices once took over the 60 s limit there).
        var large = PersistedState(districts: ["09162": "red"])
        for index in 0..<50_000 {
            large.devices["d\(index)"] = DeviceRecord(lat: 48 + Double(index) / 1e6, lon: 11, tst: index, lang: nil, district: nil,
                                                      phase: "red", dataDate: "2020-10-15", stale: false)
        }
        let order = Mutex<[String]>([])
        let (largeDone, done) = AsyncStream.makeStream(of: Void.self)
        saver.save(large) {
            order.withLock { $0.append("large") }
            done.finish()
        }
        let small = PersistedState(devices: [:], districts: ["09162": "green"])
        #expect(saver.writeNow(small))
        order.withLock { $0.append("small") }
        for await _ in largeDone {}
        // The large state was handed over first: whether its write ended before or after the
        // small one's, the small one stays in place, and the large one's file is gone.
        #expect(order.withLock { $0 } == ["small", "large"])
        #expect(try store.load() == small)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["state.json"])
    }

    @Test("the writer thread ends when its work is done and starts again for the next: a process exits only after each thread, and an idle-class one waiting for work held the exit of a stopped daemon on a busy machine")
    func writerThreadOnlyWhileItWorks() async throws {
        // Against a writer thread that waits for work, the first of these never comes (the suite's time limit ends it).
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = StateStore(directory: dir)
        try store.prepare()
        let (ends, ended) = AsyncStream.makeStream(of: Void.self)
        let saver = StateSaver(store: store, logger: Logger(label: "test"), writerEnded: { ended.yield() })
        var endings = ends.makeAsyncIterator()
        let first = PersistedState(devices: [:], districts: ["09162": "red"])
        saver.save(first)
        #expect(await endings.next() != nil, "the writer's end after the first write")
        #expect(try store.load() == first)
        let second = PersistedState(devices: [:], districts: ["09162": "green"])
        saver.save(second)
        #expect(await endings.next() != nil, "the writer's end after the second write")
        #expect(try store.load() == second)
        saver.trimHeap()
        #expect(await endings.next() != nil, "the writer's end after a trim")
        ended.finish()
    }

    @Test("a corrupt, truncated or unreadable state file is moved aside with its content and the state starts empty")
    func recovery() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = StateStore(directory: dir)
        try store.prepare()
        // No file: empty, nothing recovered.
        let none = try store.loadRecovering()
        #expect(none.state == PersistedState() && none.recovery == nil)
        let good = PersistedState(devices: [:], districts: ["09162": "red"])
        try store.save(good)
        let whole = try Data(contentsOf: URL(fileURLWithPath: store.path))
        #expect(try store.loadRecovering().state == good)
        let now = Date(timeIntervalSince1970: 1_795_519_800)  // 2026-11-24T11:30:00Z
        for (index, bad) in [Data("\u{0}garbage\u{1}".utf8), whole.prefix(whole.count / 2), Data(#"{"version":99,"districts":{},"devices":{}}"#.utf8)].enumerated() {
            try bad.write(to: URL(fileURLWithPath: store.path))
            let result = try store.loadRecovering(now: now)
            #expect(result.state == PersistedState())
            let recovery = try #require(result.recovery)
            let expected = dir + "/state.json.corrupt-20261124T113000Z" + (index == 0 ? "" : "-\(index + 1)")
            #expect(recovery.movedTo == expected)
            #expect(recovery.reason.contains("state.json"))
            #expect(!FileManager.default.fileExists(atPath: store.path))
            #expect(try Data(contentsOf: URL(fileURLWithPath: try #require(recovery.movedTo))) == bad)
        }
    }

    @Test("leftover temporary files of AtomicFile are removed, those of a running writer and other files are not")
    func leftovers() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = StateStore(directory: dir)
        try store.prepare()
        // A pid that is surely gone: beyond the kernel's pid_max (4194304 at most).
        let names = [".state.json.4194999.123.tmp", ".incidence.json.4194999.7.tmp", ".state.json.\(getppid()).5.tmp",
                     ".state.json.x.5.tmp", "state.json.4194999.1.tmp", ".state.json.4194999.1.tmp.keep", ".other.json.4194999.1.tmp", "state.json"]
        for name in names { try Data("x".utf8).write(to: URL(fileURLWithPath: dir + "/" + name)) }
        let removed = store.removeLeftovers().sorted()
        #expect(removed == [dir + "/.incidence.json.4194999.7.tmp", dir + "/.state.json.4194999.123.tmp"])
        let left = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(left == names.filter { !$0.contains("4194999.123") && !$0.contains("4194999.7") }.sorted())
    }
}

/// `ProcessMemory.trim()` after start-up: the code pages only start-up used stop counting.
@Suite("Process memory")
struct ProcessMemoryTests {
    /// The resident kB of this process's executable code mapping (`r-xp`, /proc/self/smaps).
    static func residentCode() throws -> Int {
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let smaps = try String(contentsOfFile: "/proc/self/smaps", encoding: .utf8)
        var inCode = false, kB = 0
        for line in smaps.split(separator: "\n") {
            if let first = line.first, first.isHexDigit, line.contains("-") {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                inCode = fields.count >= 6 && fields[1] == "r-xp" && fields[5...].joined(separator: " ") == exe
            } else if inCode, line.hasPrefix("Rss:") {
                kB += Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
            }
        }
        return kB
    }

    @Test("a trim unmaps the executable's code pages, and the code goes on running from the page cache")
    func trimReleasesCodePages() throws {
        let before = try Self.residentCode()
        try #require(before > 1_000, "the test binary's code is resident: \(before) kB")
        ProcessMemory.trim()
        let after = try Self.residentCode()
        // Other tests run meanwhile and map back what they use; most of the mapping stays out.
        #expect(after < before / 2, "\(before) kB resident before the trim, \(after) kB after")
        // The code still runs (this is code of the same mapping).
        #expect(try StateStore(directory: FileManager.default.temporaryDirectory.path).path.hasSuffix("state.json"))
    }
}
