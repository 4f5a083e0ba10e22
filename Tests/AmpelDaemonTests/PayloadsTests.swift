@testable import AmpelDaemon
import AmpelDomain
import Foundation
import Testing

/// `bridge/info` is written with `JSONWriter`; its bytes must stay what `JSONEncoder` (with
/// Ampel's settings and `null` for absent values) writes, or the retained info would flip
/// between two spellings across an upgrade.
@Suite("Payloads")
struct PayloadsTests {
    /// The reference shape, encoded by `JSONEncoder`.
    struct Reference: Encodable {
        struct Counts: Encodable {
            var accepted: [String: Int], skipped: [String: Int], dropped: [String: Int]
            var alerts: Int, published: Int, publishFailures: Int, datasetsApplied: Int, datasetsRejected: Int, invalidLang: Int
            var reconnects: Int, republished: Int, alertsResent: Int, intakePaused: Int, outgoingWaits: Int
        }
        struct Recovered: Encodable {
            var at: String, movedTo: String, reason: String
        }
        let info: BridgeInfo
        enum Keys: String, CodingKey { case version, ruleSet, source, dataDate, lastFetch, lastError, stale, devices, counters, stateRecovered }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(info.version, forKey: .version)
            try c.encode(info.ruleSet, forKey: .ruleSet)
            try c.encode(info.source, forKey: .source)
            try c.encode(info.dataDate, forKey: .dataDate)
            try c.encode(info.lastFetch, forKey: .lastFetch)
            try c.encode(info.lastError, forKey: .lastError)
            try c.encode(info.stale, forKey: .stale)
            try c.encode(info.devices, forKey: .devices)
            let k = info.counters
            try c.encode(Counts(accepted: k.accepted, skipped: k.skipped, dropped: k.dropped, alerts: k.alerts, published: k.published,
                                publishFailures: k.publishFailures, datasetsApplied: k.datasetsApplied,
                                datasetsRejected: k.datasetsRejected, invalidLang: k.invalidLang,
                                reconnects: k.reconnects, republished: k.republished, alertsResent: k.alertsResent,
                                intakePaused: k.intakePaused, outgoingWaits: k.outgoingWaits),
                         forKey: .counters)
            try c.encode(info.stateRecovered.map { Recovered(at: $0.at, movedTo: $0.movedTo, reason: $0.reason) }, forKey: .stateRecovered)
        }
    }

    @Test("bridge/info bytes equal JSONEncoder's, with and without the optional fields")
    func bridgeInfo() throws {
        var counters = Counters()
        let empty = BridgeInfo(version: "0.1.0", ruleSet: "bavaria", source: "snapshot:2020-10-15", dataDate: "2020-10-15",
                               lastFetch: nil, lastError: nil, stale: false, devices: 0, counters: counters)
        counters.accepted = ["owntracks": 3, "plain": 12, "traccar": 1]
        counters.skipped = ["lwt": 1, "other": 2, "untyped": 5, "array": 1]
        counters.dropped = ["not-json": 1, "invalid-coordinates": 2, "out-of-order": 7, "oversized": 1, "unsafe-device-key": 4]
        counters.alerts = 9
        counters.published = 123_456
        counters.publishFailures = 2
        counters.datasetsApplied = 3
        counters.datasetsRejected = 1
        counters.reconnects = 2
        counters.republished = 200_431
        counters.invalidLang = 6
        counters.alertsResent = 3
        counters.intakePaused = 12
        counters.outgoingWaits = 13
        let full = BridgeInfo(version: "0.1.0", ruleSet: "bavaria-initial", source: "rki", dataDate: "2020-11-05",
                              lastFetch: "2020-11-05T10:15:00Z", lastError: #"HTTP 503 "busy" at https://example/a\b"#, stale: true,
                              devices: 100_000, counters: counters,
                              stateRecovered: StateRecovery(movedTo: "/var/lib/ampel/state.json.corrupt-20261124T113000Z",
                                                            reason: #"/var/lib/ampel/state.json is not a valid state file: "x" \ ü"#,
                                                            at: "2026-11-24T11:30:00Z"))
        for info in [empty, full] {
            #expect(String(decoding: info.json(), as: UTF8.self) == (try AmpelJSON.string(Reference(info: info))))
        }
    }
}
