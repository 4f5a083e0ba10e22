@testable import AmpelDaemon
import AmpelCore
import AmpelData
import AmpelDomain
import Foundation
import Testing

@Suite("Lamps")
struct LampTests {
    let lamps = [
        LampSettings(name: "city", driver: .wled, topic: "wled/city", follows: .district("09162")),
        LampSettings(name: "phone", driver: .tasmota, topic: "lamp2", follows: .device("alice/phone")),
        LampSettings(name: "sign", driver: .plain, topic: "signs/door", follows: .district("09171"), availabilityTopic: "signs/door/up"),
        LampSettings(name: "abroad", driver: .plain, topic: "signs/bw", follows: .district("08111")),
    ]

    @Test("lamps get their colour at start, on change only, and again when they come online")
    func lifecycle() throws {
        var engine = SignalEngine(settings: Fixtures.settings(lamps: lamps), dataset: Fixtures.october, stale: false)
        let start = engine.event(.start)
        let red = Fixtures.ruleSet.rules(for: .red)!.color.hex
        let green = Fixtures.ruleSet.rules(for: .green)!.color.hex
        let darkred = Fixtures.ruleSet.rules(for: .darkred)!.color.hex
        #expect(start.on("wled/city/col").map(\.text) == [red])
        #expect(start.on("wled/city/api").map(\.text) == ["T=1&FX=0"])
        #expect(start.on("signs/door").map(\.text) == [green])
        #expect(start.on("signs/bw").map(\.text) == [Fixtures.ruleSet.outside.color.hex])
        // A lamp following an unseen device stays dark.
        #expect(start.on("cmnd/lamp2/Color").isEmpty)
        #expect(start.published.filter { !$0.topic.hasPrefix("ampel/") && !$0.topic.hasPrefix("homeassistant/") }.allSatisfy { !$0.retain })

        let seen = engine.event(.fix(LocationFix(device: "alice/phone", latitude: 48, longitude: 11, tst: 1), place: Fixtures.altoetting, receivedAt: 0))
        #expect(seen.on("cmnd/lamp2/Color").map(\.text) == [green])
        #expect(seen.on("cmnd/lamp2/Power").map(\.text) == ["ON"])
        let same = engine.event(.fix(LocationFix(device: "alice/phone", latitude: 48, longitude: 11, tst: 2), place: Fixtures.altoetting, receivedAt: 0))
        #expect(same.on("cmnd/lamp2/Color").isEmpty)

        let november = engine.event(.data(Fixtures.november, stale: false))
        #expect(november.on("wled/city/col").map(\.text) == [darkred])
        #expect(november.on("wled/city/api").map(\.text) == ["T=1&FX=1"])
        // The device's lamp follows its device: Altötting is dark red too now, and a Tasmota
        // lamp blinks for it (hardware/ZERO-FIRMWARE.md); back to steady when it leaves.
        #expect(november.on("cmnd/lamp2/Color").map(\.text) == [darkred])
        #expect(november.on("cmnd/lamp2/Power").map(\.text) == ["BLINK"])
        let back = engine.event(.data(Fixtures.october, stale: false))
        #expect(back.on("cmnd/lamp2/Power").map(\.text) == ["ON"])
        #expect(back.on("wled/city/api").map(\.text) == ["T=1&FX=0"])
    }

    @Test("a lamp gets its colour again when it comes back online, not on every repeat of online")
    func availability() {
        var engine = SignalEngine(settings: Fixtures.settings(lamps: lamps), dataset: Fixtures.october, stale: false)
        _ = engine.event(.start)
        func colour(_ name: String, online: Bool, retained: Bool = false) -> [String] {
            engine.event(.lampAvailability(name: name, online: online, retained: retained)).published.map(\.description)
        }
        // Replayed at subscribe: it was online when the start's commands went out.
        #expect(colour("city", online: true, retained: true).isEmpty)
        // WLED republishes `online` after each change of its state: no answer to those.
        #expect(colour("city", online: true).isEmpty)
        #expect(colour("city", online: true).isEmpty)
        // Offline, then back: the colour again, once.
        #expect(colour("city", online: false).isEmpty)
        #expect(colour("city", online: true).map { $0.hasPrefix("wled/city/") } == [true, true])
        #expect(colour("city", online: true).isEmpty)
        // A lamp first heard live (it connected after the start): it missed the start's commands.
        #expect(colour("sign", online: true).count == 1)
        #expect(colour("sign", online: true).isEmpty)
        // Offline when the daemon subscribed (its Last Will was retained), online later.
        var fresh = SignalEngine(settings: Fixtures.settings(lamps: lamps), dataset: Fixtures.october, stale: false)
        _ = fresh.event(.start)
        #expect(fresh.event(.lampAvailability(name: "sign", online: false, retained: true)).isEmpty)
        #expect(fresh.event(.lampAvailability(name: "sign", online: true, retained: false)).published.count == 1)
        #expect(engine.event(.lampAvailability(name: "nope", online: true, retained: false)).isEmpty)
    }

    @Test("drivers and availability topics")
    func drivers() {
        let look = LampDriver.Look(color: RGB(red: 0x8B, green: 0, blue: 0), blink: true)
        #expect(LampDriver.commands(for: lamps[0], look: look).map(\.description) == ["wled/city/col #8B0000", "wled/city/api T=1&FX=1"])
        #expect(LampDriver.commands(for: lamps[1], look: look).map(\.description) == ["cmnd/lamp2/Color #8B0000", "cmnd/lamp2/Power BLINK"])
        let steady = LampDriver.Look(color: RGB(red: 0xFF, green: 0, blue: 0), blink: false)
        #expect(LampDriver.commands(for: lamps[1], look: steady).map(\.description) == ["cmnd/lamp2/Color #FF0000", "cmnd/lamp2/Power ON"])
        #expect(LampDriver.commands(for: lamps[2], look: look).map(\.description) == ["signs/door #8B0000"])
        #expect(LampDriver.availability(of: lamps[0]).map { [$0.topic, $0.online] } == ["wled/city/status", "online"])
        #expect(LampDriver.availability(of: lamps[1]).map { [$0.topic, $0.online] } == ["tele/lamp2/LWT", "Online"])
        #expect(LampDriver.availability(of: lamps[2]).map { [$0.topic, $0.online] } == ["signs/door/up", "online"])
        #expect(LampDriver.availability(of: lamps[3]) == nil)
    }
}
