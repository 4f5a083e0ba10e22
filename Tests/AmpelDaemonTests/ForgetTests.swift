import AmpelMessages
@testable import AmpelDaemon
import AmpelDomain
import Foundation
import Logging
import Testing

/// `devices.forget_after`: the engine forgets a device not heard from for that long, on the
/// time the daemon passes in (no clock of its own), and the journal keeps it forgotten.
@Suite("Forgetting devices")
struct ForgetTests {
    static let day = 86_400

    func engine(forgetAfter: Duration?) -> SignalEngine {
        var settings = Fixtures.settings()
        settings.forgetAfter = forgetAfter
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        _ = engine.event(.start)
        return engine
    }

    func fix(_ device: String, tst: Int) -> LocationFix {
        LocationFix(device: device, latitude: 48.137, longitude: 11.575, tst: tst, lang: nil)
    }

    @Test("a device silent for forget_after is removed, its state and discovery configs cleared with empty retained messages, persisted first")
    func forgetsSilentDevice() throws {
        var engine = engine(forgetAfter: .seconds(30 * Self.day))
        _ = engine.event(.fix(fix("alice/phone", tst: 1_000), place: Fixtures.muenchen, receivedAt: 1_000))
        _ = engine.event(.fix(fix("bob/phone", tst: 1_000 + 10 * Self.day), place: Fixtures.muenchen, receivedAt: 1_000 + 10 * Self.day))

        // One second short of 30 days: nothing yet.
        #expect(engine.event(.forget(now: 1_000 + 30 * Self.day)).isEmpty)
        #expect(engine.devices["alice/phone"] != nil)

        let actions = engine.event(.forget(now: 1_001 + 30 * Self.day))
        #expect(engine.devices["alice/phone"] == nil)
        #expect(engine.devices["bob/phone"] != nil)
        #expect(actions.first == .decide(Decision(.forgotten(key: "alice/phone"))))
        let cleared = actions.published
        let object = DeviceKey.objectID("alice/phone")
        #expect(Set(cleared.map(\.topic)) == [
            "ampel/device/alice/phone/state",
            "homeassistant/sensor/ampel/device_\(object)/config",
            "homeassistant/event/ampel/device_\(object)/config",
        ])
        #expect(cleared.allSatisfy { $0.payload.isEmpty && $0.retain && $0.qos == .atLeastOnce })
        // The entities go before their state: Home Assistant would render the emptied state
        // with the entity's template while it still has the entity.
        #expect(cleared.last?.topic == "ampel/device/alice/phone/state", "\(cleared.map(\.topic))")
        #expect(actions.last == .publishInfo)
        #expect(engine.persisted.devices["alice/phone"] == nil)
        // Forgotten once: the next check finds nothing more.
        #expect(engine.event(.forget(now: 1_002 + 30 * Self.day)).isEmpty)
    }

    @Test("an OwnTracks user's card is cleared with the user's last device, not before; a user who reports again gets a new card")
    func clearsTheCardWithTheLastDevice() throws {
        var settings = Fixtures.settings(owntracks: OwnTracksNotices())
        settings.forgetAfter = .seconds(30 * Self.day)
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        _ = engine.event(.start)
        func phone(_ device: String, tst: Int) -> SignalEngine.Event {
            .fix(LocationFix(device: device, latitude: 48.137, longitude: 11.575, tst: tst, owntracks: true), place: Fixtures.muenchen, receivedAt: tst)
        }
        let card = "owntracks/alice/ampel/info"
        #expect(engine.event(phone("alice/phone", tst: 1_000)).on(card).count == 1)
        _ = engine.event(phone("alice/tablet", tst: 1_000 + 10 * Self.day))
        _ = engine.event(phone("bob/phone", tst: 1_000))
        // alice/phone and bob/phone go: bob's card with his only device, alice's stays for her tablet.
        let first = engine.event(.forget(now: 1_001 + 30 * Self.day))
        #expect(first.on(card).isEmpty)
        let bobs = first.on("owntracks/bob/ampel/info")
        #expect(bobs.count == 1 && bobs.allSatisfy { $0.payload.isEmpty && $0.retain && $0.qos == .atLeastOnce })
        // The tablet goes too: alice's card is cleared.
        let second = engine.event(.forget(now: 1_001 + 40 * Self.day))
        let alices = second.on(card)
        #expect(alices.count == 1 && alices.allSatisfy { $0.payload.isEmpty && $0.retain })
        // alice reports again: a new card, before anything else of hers.
        #expect(engine.event(phone("alice/phone", tst: 1_000 + 41 * Self.day)).on(card).first?.payload.isEmpty == false)
    }

    @Test("without forget_after no device is forgotten")
    func off() {
        var engine = engine(forgetAfter: nil)
        _ = engine.event(.fix(fix("alice/phone", tst: 1_000), place: Fixtures.muenchen, receivedAt: 1_000))
        #expect(engine.event(.forget(now: 1_000 + 3_650 * Self.day)).isEmpty)
        #expect(engine.devices["alice/phone"] != nil)
    }

    @Test("a forgotten device that reports again is a new device: discovery and a first-sighting alert")
    func returns() throws {
        var engine = engine(forgetAfter: .seconds(Self.day))
        _ = engine.event(.fix(fix("alice/phone", tst: 1_000), place: Fixtures.muenchen, receivedAt: 1_000))
        _ = engine.event(.forget(now: 1_000 + 2 * Self.day))
        let again = engine.event(.fix(fix("alice/phone", tst: 1_000 + 3 * Self.day), place: Fixtures.muenchen, receivedAt: 1_000 + 3 * Self.day))
        let alert = try again.json("ampel/device/alice/phone/alert")
        #expect(alert["from"] is NSNull)
        #expect(again.topics.contains { $0.hasPrefix("homeassistant/sensor/ampel/device_") })
    }

    @Test("the journal replays a forgotten device as gone, over a snapshot that still held it")
    func journalKeepsItForgotten() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-forget-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let record = DeviceRecord(lat: 48.1, lon: 11.5, tst: 1_000, lang: nil, district: nil, phase: "outside", dataDate: "2020-10-15", stale: false)
        let snapshot = PersistedState(devices: ["alice/phone": record, "bob/phone": record])
        let journal = try Journal(directory: dir, continuing: JournalReplay.read(directory: dir, over: snapshot), logger: Logger(label: "test"))
        journal.append(.forgotten(key: "alice/phone"))
        journal.sync()
        let replay = JournalReplay.read(directory: dir, over: snapshot)
        #expect(replay.state.devices["alice/phone"] == nil)
        #expect(replay.state.devices["bob/phone"] == record)
    }
}
