@testable import AmpelDaemon
import AmpelDomain
import AmpelGeo
import Testing

@Suite("Device table")
struct DeviceTableTests {
    @Test("records come back as they were stored; the language as the one it selects")
    func packingRoundTrip() {
        var random = SplitMix64(seed: 42)
        let districts: [Signal.DistrictRef?] = [
            nil, .init(ags: "09162", name: "SK München", state: "Bayern", type: "SK"),
            .init(ags: "09162", name: "München", state: "Bayern", type: nil),  // same code, other name: kept apart
            .init(ags: "08111", name: "SK Stuttgart", state: "Baden-Württemberg", type: "SK"),
        ]
        let phases = ["green", "yellow", "red", "darkred", "outside"]
        var table = DeviceTable()
        var plain: [String: DeviceRecord] = [:]
        for index in 0..<5000 {
            let record = DeviceRecord(
                lat: Double.random(in: -90...90, using: &random), lon: Double.random(in: -180...180, using: &random),
                tst: Int.random(in: 0..<2_000_000_000, using: &random), lang: [nil, "de", "en"][index % 3],
                district: districts[index % districts.count], phase: phases[index % phases.count],
                dataDate: "2020-11-\(10 + index % 20)", stale: index % 7 == 0, owntracks: index % 5 < 2,
                announced: index % 11 != 0)
            let key = "fleet/\(index % 4000)"  // some keys written twice: the last write counts
            table[key] = record
            plain[key] = record
        }
        #expect(table.count == plain.count)
        #expect(table.records == plain)
        #expect(table.sortedKeys == plain.keys.sorted())
        var seen = 0
        table.forEach { key, record in
            #expect(plain[key] == record)
            seen += 1
        }
        #expect(seen == plain.count)
        table["fleet/1"] = nil
        #expect(table["fleet/1"] == nil && table.count == plain.count - 1)
    }

    @Test("an entry stays 40 bytes: staleness and the OwnTracks flag share a byte beside the heartbeat's time")
    func entrySize() {
        // 100,000 devices: 4.0 MB of entries; the on_change heartbeat's 4-byte time took it from
        // 32 to 40, and one more Bool beside it would take it to 48.
        #expect(MemoryLayout<DeviceTable.Entry>.stride == 40)
    }

    @Test("a requested language is kept as the language it selects")
    func languageIsNormalised() {
        var table = DeviceTable()
        for (requested, kept) in [("de-AT", "de"), ("de_DE.UTF-8", "de"), ("fr", "en"), ("en", "en")] {
            table["d"] = DeviceRecord(lat: 1, lon: 2, tst: 3, lang: requested, district: nil, phase: "outside", dataDate: "2020-11-05", stale: false)
            #expect(table["d"]?.lang == kept)
        }
    }

    @Test("the compact map behaves like a Dictionary under random inserts, updates and removals")
    func compactMapAgreesWithDictionary() {
        var random = SplitMix64(seed: 7)
        var map = CompactMap<Int>()
        var reference: [String: Int] = [:]
        for step in 0..<60_000 {
            let key = "k\(Int.random(in: 0..<5000, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0:
                map[key] = nil
                reference[key] = nil
            default:
                map[key] = step
                reference[key] = step
            }
            if step % 997 == 0 {
                #expect(map.count == reference.count)
                let probe = "k\(Int.random(in: 0..<6000, using: &random))"
                #expect(map[probe] == reference[probe])
            }
        }
        #expect(map.count == reference.count)
        #expect(Dictionary(uniqueKeysWithValues: zip(map.keys, map.values)) == reference)
        for (key, value) in reference { #expect(map[key] == value) }
    }

    @Test("keys are bytes: café precomposed and decomposed are two devices, as they are two MQTT topics")
    func canonicalTwins() {
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed)  // Swift's String equality: canonical equivalence
        var table = DeviceTable()
        let record = DeviceRecord(lat: 1, lon: 2, tst: 3, lang: nil, district: nil, phase: "outside", dataDate: "2020-10-15", stale: false)
        table[composed] = record
        #expect(table[decomposed] == nil)
        var other = record
        other.tst = 4
        table[decomposed] = other
        #expect(table.count == 2)
        #expect(table[composed]?.tst == 3 && table[decomposed]?.tst == 4)
    }
}
