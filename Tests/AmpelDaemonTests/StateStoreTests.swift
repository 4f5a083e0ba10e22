@testable import AmpelDaemon
import AmpelCore
import AmpelData
import AmpelDomain
import Foundation
import Testing

@Suite("State store and log limiter")
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

    @Test("the log limiter lets a burst through per interval and counts the rest")
    func limiter() {
        var limiter = RateLimiter(interval: 10, burst: 2)
        func admit(_ now: Double) -> [Int] {
            let result = limiter.admit(now: now)
            return [result.log ? 1 : 0, result.suppressed]
        }
        #expect(admit(0) == [1, 0])
        #expect(admit(1) == [1, 0])
        #expect(admit(2) == [0, 0])
        #expect(admit(3) == [0, 0])
        #expect(admit(10.5) == [1, 2])
    }
}
