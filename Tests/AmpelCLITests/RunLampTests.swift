import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` driving Tasmota and WLED lamps through a real mosquitto, as
/// hardware/ZERO-FIRMWARE.md and docs/topics.md ("Lamps") promise.
@Suite("ampel run drives lamps as documented (built binary, real mosquitto)")
struct RunLampTests {
    @Test("a Tasmota lamp on a DARK RED district blinks, one elsewhere stays on; WLED gets its colour again when it comes back, not on each repeat of online")
    func tasmotaBlinksAndWLEDComesBack() async throws {
        let day = "2020-11-05"
        let phases = try rawBavarianIncidences(day: day).mapValues(expectedPhase)
        let dark = try #require(phases.filter { $0.value == "darkred" }.keys.sorted().first)
        let calm = try #require(phases.filter { $0.value != "darkred" }.keys.sorted().first, "a district not dark red on \(day)")
        var options = Scene.Options()
        options.topics = ["cmnd/#", "wled/strip/col", "wled/strip/api", "ampel/bridge/state"]
        options.date = day
        options.configuration = """
            lamps:
              - {name: dark, driver: tasmota, topic: lamp-dark, district: "\(dark)"}
              - {name: calm, driver: tasmota, topic: lamp-calm, district: "\(calm)"}
              - {name: strip, driver: wled, topic: wled/strip, district: "\(dark)"}

            """
        try await Scene.run(options) { scene in
            let collector = scene.collector
            try await scene.start()
            func last(_ topic: String, since mark: Int = 0) -> String? { collector.records(since: mark).last { $0.topic == topic }?.payload }
            try await collector.wait("the start's lamp commands") { records in
                ["cmnd/lamp-dark/Power", "cmnd/lamp-calm/Power", "wled/strip/api"].allSatisfy { topic in records.contains { $0.topic == topic } }
            }
            #expect(last("cmnd/lamp-dark/Power") == "BLINK", "\(collector.records())")
            #expect(last("cmnd/lamp-calm/Power") == "ON")
            #expect(last("cmnd/lamp-dark/Color") == "#8B0000")
            #expect(last("wled/strip/api") == "T=1&FX=1")

            // The strip says online, repeats it, goes offline and comes back. One connection per
            // message, each acknowledged before the next: the daemon reads them in this order, and a
            // colour for a repeat would come before the one awaited.
            func say(_ text: String) async throws {
                try await Scene.publish(scene.broker, [("wled/strip/status", text)])
            }
            let first = collector.mark
            try await say("online")
            try await collector.wait("the colour for the strip's first live online", since: first) { $0.contains { $0.topic == "wled/strip/col" } }
            let repeats = collector.mark
            for text in ["online", "online", "offline", "online"] { try await say(text) }
            try await collector.wait("the colour for the strip's return", since: repeats) { $0.contains { $0.topic == "wled/strip/col" } }
            // A colour for a repeat has the same payload as the awaited one: count only after a
            // barrier. The stop's `offline` follows everything the daemon sent.
            try await scene.stop()
            let colours = collector.records(since: repeats).filter { $0.topic == "wled/strip/col" }
            #expect(colours.map(\.payload) == ["#8B0000"], "one colour for offline -> online, none for the repeats")
        }
    }
}
