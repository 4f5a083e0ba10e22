@testable import AmpelDaemon
import AmpelData
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
            var reconnects: Int, republished: Int, alertsResent: Int, intakePaused: Int, outgoingWaits: Int, owntracksTransitions: Int
            var forgotten: Int, failovers: Int
            var dataChecks: Int, dataCorrections: Int, dataHeld: Int, dataNotModified: Int, dataRevisions: Int
            var dataSkippedRows: Int, dataUnchanged: Int, dataUpdates: Int
            var alertsSuppressed: [String: Int]
            var refused: [String: [String: Int]]
            var webhooks: [String: Webhook]
        }
        struct Webhook: Encodable {
            struct Dropped: Encodable { var gaveUp: Int, queueFull: Int }
            var delivered: Int, dropped: Dropped, failedAttempts: Int, queued: Int
        }
        struct Rebuilt: Encodable {
            var complete: Bool, devices: Int, districts: Int, expectedDevices: Int?, known: Int, skipped: Int
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(complete, forKey: .complete)
                try c.encode(devices, forKey: .devices)
                try c.encode(districts, forKey: .districts)
                try c.encode(expectedDevices, forKey: .expectedDevices)
                try c.encode(known, forKey: .known)
                try c.encode(skipped, forKey: .skipped)
            }
            enum CodingKeys: String, CodingKey { case complete, devices, districts, expectedDevices, known, skipped }
        }
        struct Recovered: Encodable {
            var at: String, movedTo: String?, reason: String, rebuilt: Rebuilt?
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(at, forKey: .at)
                try c.encode(movedTo, forKey: .movedTo)
                try c.encode(reason, forKey: .reason)
                try c.encode(rebuilt, forKey: .rebuilt)
            }
            enum CodingKeys: String, CodingKey { case at, movedTo, reason, rebuilt }
        }
        let info: BridgeInfo
        enum Keys: String, CodingKey { case broker, version, ruleSet, source, dataDate, dataKind, held, journalError, lastCheck, lastFetch, lastError, stale, devices, counters, stateRecovered }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(info.broker, forKey: .broker)
            try c.encode(info.version, forKey: .version)
            try c.encode(info.ruleSet, forKey: .ruleSet)
            try c.encode(info.source, forKey: .source)
            try c.encode(info.dataDate, forKey: .dataDate)
            try c.encode(info.dataKind, forKey: .dataKind)
            try c.encode(info.held, forKey: .held)
            try c.encode(info.journalError, forKey: .journalError)
            try c.encode(info.lastCheck, forKey: .lastCheck)
            try c.encode(info.lastFetch, forKey: .lastFetch)
            try c.encode(info.lastError, forKey: .lastError)
            try c.encode(info.stale, forKey: .stale)
            try c.encode(info.devices, forKey: .devices)
            let k = info.counters
            try c.encode(Counts(accepted: k.accepted, skipped: k.skipped, dropped: k.dropped, alerts: k.alerts, published: k.published,
                                publishFailures: k.publishFailures, datasetsApplied: k.datasetsApplied,
                                datasetsRejected: k.datasetsRejected, invalidLang: k.invalidLang,
                                reconnects: k.reconnects, republished: k.republished, alertsResent: k.alertsResent,
                                intakePaused: k.intakePaused, outgoingWaits: k.outgoingWaits, owntracksTransitions: k.owntracksTransitions, forgotten: k.forgotten, failovers: k.failovers,
                                dataChecks: k.data.checks, dataCorrections: k.data.corrections, dataHeld: k.data.held,
                                dataNotModified: k.data.notModified, dataRevisions: k.data.revisions, dataSkippedRows: k.data.skippedRows,
                                dataUnchanged: k.data.unchanged, dataUpdates: k.data.updates, alertsSuppressed: k.alertsSuppressed,
                                refused: k.refused, webhooks: k.webhooks.mapValues {
                                    Webhook(delivered: $0.delivered, dropped: .init(gaveUp: $0.droppedGaveUp, queueFull: $0.droppedQueueFull),
                                            failedAttempts: $0.failedAttempts, queued: $0.queued)
                                }),
                         forKey: .counters)
            try c.encode(info.stateRecovered.map { recovered in
                Recovered(at: recovered.at, movedTo: recovered.movedTo, reason: recovered.reason, rebuilt: recovered.rebuilt.map {
                    Rebuilt(complete: $0.complete, devices: $0.devices, districts: $0.districts, expectedDevices: $0.expectedDevices,
                            known: $0.known, skipped: $0.skipped)
                })
            }, forKey: .stateRecovered)
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
        counters.refused = ["notAuthorized": ["alert": 1, "state": 3], "reason0x80": ["discovery": 2]]
        counters.datasetsApplied = 3
        counters.datasetsRejected = 1
        counters.reconnects = 2
        counters.republished = 200_431
        counters.invalidLang = 6
        counters.alertsResent = 3
        counters.alertsSuppressed = ["old-fix": 4, "dwell": 2]
        counters.intakePaused = 12
        counters.forgotten = 3
        counters.failovers = 5
        counters.outgoingWaits = 13
        var phone = WebhookCounters()
        phone.delivered = 17
        phone.failedAttempts = 4
        phone.droppedGaveUp = 1
        phone.droppedQueueFull = 2
        phone.queued = 3
        counters.webhooks = ["phone": phone, "0": WebhookCounters(), "Gotify \"home\"": phone]
        counters.owntracksTransitions = 14
        counters.data.checks = 40
        counters.data.corrections = 1
        counters.data.held = 2
        counters.data.notModified = 30
        counters.data.revisions = 11_200
        counters.data.skippedRows = 804
        counters.data.unchanged = 3
        counters.data.updates = 5
        let full = BridgeInfo(broker: #"node-2.example:1883 "x""#, version: "0.1.0", ruleSet: "bavaria-initial", source: "rki", dataDate: "2020-11-05", dataKind: "stand-in",
                              lastFetch: "2020-11-05T10:15:00Z", lastError: #"HTTP 503 "busy" at https://example/a\b"#,
                              lastCheck: "2020-11-05T10:25:00Z", held: #"400 of 400 districts changed by more than a factor of 5 "x""#, stale: true,
                              devices: 100_000, counters: counters,
                              stateRecovered: StateRecovery(movedTo: "/var/lib/ampel/state.json.corrupt-20261124T113000Z",
                                                            reason: #"/var/lib/ampel/state.json is not a valid state file: "x" \ ü"#,
                                                            at: "2026-11-24T11:30:00Z"))
        // A state file missing while the journal continues from it: nothing was moved; and what
        // the start read back from the broker, with and without the last run's device count.
        var missing = full
        missing.stateRecovered = StateRecovery(movedTo: nil, reason: "state.json is missing", at: "2026-11-24T11:30:00Z",
                                               rebuilt: StateRebuild(devices: 99_000, districts: 96, known: 1_000, skipped: 2,
                                                                     expectedDevices: nil, complete: true))
        // A journal that cannot be written: its error is the last one.
        missing.journalError = #"the journal cannot be written: /var/lib/ampel/journal-00000007.log: cannot reserve 4194304 bytes: No space left on device "x""#
        missing.lastError = missing.journalError
        var cut = full
        cut.stateRecovered?.rebuilt = StateRebuild(devices: 74_566, districts: 0, known: 0, skipped: 0, expectedDevices: 100_000,
                                                   complete: false)
        for info in [empty, full, missing, cut] {
            #expect(String(decoding: info.json(), as: UTF8.self) == (try AmpelJSON.string(Reference(info: info))))
        }
    }
}
