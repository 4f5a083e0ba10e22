@testable import AmpelDaemon
import Testing

/// The topic class a refused publish is counted under (`counters.refused`, `/metrics`).
struct RefusalClassTests {
    @Test("each kind of topic the daemon publishes has its class; the Home Assistant copy of an alert is an event", arguments: [
        ("ampel/device/phone/alert", "alert"),
        ("ampel/device/phone/event", "event"),
        ("ampel/device/phone/state", "state"),
        ("ampel/district/09162/alert", "alert"),
        ("ampel/district/09162/phase", "phase"),
        ("ampel/rules/bavaria-2020/red/de", "texts"),
        ("ampel/states/09", "stateReport"),
        ("ampel/bridge/info", "bridge"),
        ("homeassistant/event/ampel_phone/alert/config", "discovery"),
        ("owntracks/anna/ampel/event", "owntracks"),
        ("wled/lamp1/api", "other"),
    ])
    func classOf(_ topic: String, _ expected: String) {
        #expect(Topics().refusalClass(of: topic, discoveryPrefix: "homeassistant") == expected)
    }
}
