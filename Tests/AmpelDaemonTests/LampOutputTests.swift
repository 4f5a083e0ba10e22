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
        // The device's lamp follows its device: Altötting is dark red too now.
        #expect(november.on("cmnd/lamp2/Color").map(\.text) == [darkred])

        let online = engine.event(.lampOnline(name: "sign"))
        #expect(online.on("signs/door").count == 1)
        #expect(engine.event(.lampOnline(name: "nope")).isEmpty)
    }

    @Test("drivers and availability topics")
    func drivers() {
        let look = LampDriver.Look(color: RGB(red: 0x8B, green: 0, blue: 0), blink: true)
        #expect(LampDriver.commands(for: lamps[0], look: look).map(\.description) == ["wled/city/col #8B0000", "wled/city/api T=1&FX=1"])
        #expect(LampDriver.commands(for: lamps[1], look: look).map(\.description) == ["cmnd/lamp2/Color #8B0000", "cmnd/lamp2/Power ON"])
        #expect(LampDriver.commands(for: lamps[2], look: look).map(\.description) == ["signs/door #8B0000"])
        #expect(LampDriver.availability(of: lamps[0]).map { [$0.topic, $0.online] } == ["wled/city/status", "online"])
        #expect(LampDriver.availability(of: lamps[1]).map { [$0.topic, $0.online] } == ["tele/lamp2/LWT", "Online"])
        #expect(LampDriver.availability(of: lamps[2]).map { [$0.topic, $0.online] } == ["signs/door/up", "online"])
        #expect(LampDriver.availability(of: lamps[3]) == nil)
    }
}
