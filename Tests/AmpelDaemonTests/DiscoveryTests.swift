@testable import AmpelDaemon
import AmpelCore
import AmpelData
import AmpelDomain
import Foundation
import Testing

@Suite("Home Assistant discovery")
struct DiscoveryTests {
    @Test("a district sensor: enum of phases, attributes from the state topic, availability on the bridge")
    func district() throws {
        let discovery = Discovery(prefix: "homeassistant", topics: Topics(), version: "1.0", ruleSet: Fixtures.ruleSet)
        let message = discovery.district(ags: "09162", name: "SK München")
        #expect(message.topic == "homeassistant/sensor/ampel/district_09162/config")
        #expect(message.retain && message.qos == 1)
        let config = try #require(JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
        #expect(config["device_class"] as? String == "enum")
        #expect(config["options"] as? [String] == ["green", "yellow", "red", "darkred", "outside"])
        #expect(config["state_topic"] as? String == "ampel/district/09162/state")
        #expect(config["json_attributes_topic"] as? String == "ampel/district/09162/state")
        #expect(config["value_template"] as? String == "{{ value_json.phase }}")
        #expect(config["unique_id"] as? String == "ampel_district_09162")
        let availability = try #require((config["availability"] as? [[String: Any]])?.first)
        #expect(availability["topic"] as? String == "ampel/bridge/state")
        #expect(availability["value_template"] as? String == "{{ value_json.state }}")
        let device = try #require(config["device"] as? [String: Any])
        #expect(device["identifiers"] as? [String] == ["ampel_district_09162"])
        #expect(device["name"] as? String == "Ampel SK München")
        let template = try #require(config["json_attributes_template"] as? String)
        #expect(template.contains("value_json.incidence") && template.contains("value_json.dataDate") && template.contains("value_json.stale"))
    }

    @Test("a device sensor uses the device's state topic and a distinct unique id")
    func device() throws {
        let discovery = Discovery(prefix: "ha", topics: Topics(base: "signals"), version: "1.0", ruleSet: Fixtures.ruleSet)
        let message = discovery.device(key: "alice/phone", name: "Alice")
        #expect(message.topic.hasPrefix("ha/sensor/signals/device_alice_phone_"))
        let config = try #require(JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
        #expect(config["state_topic"] as? String == "signals/device/alice/phone/state")
        #expect((config["unique_id"] as? String)?.hasPrefix("signals_device_alice_phone_") == true)
        #expect((config["device"] as? [String: Any])?["name"] as? String == "Ampel Alice")
    }

    @Test("discovery is re-sent when Home Assistant comes online, and off when disabled")
    func resend() {
        var engine = SignalEngine(settings: Fixtures.settings(), dataset: Fixtures.october, stale: false)
        _ = engine.event(.start)
        _ = engine.event(.fix(LocationFix(device: "d", latitude: 1, longitude: 1, tst: 1), place: .abroad, receivedAt: 0))
        #expect(engine.event(.homeAssistantOnline).published.count == 97)
        var off = SignalEngine(settings: Fixtures.settings(discovery: false), dataset: Fixtures.october, stale: false)
        #expect(!off.event(.start).topics.contains { $0.hasPrefix("homeassistant/") })
        #expect(off.event(.homeAssistantOnline).isEmpty)
    }
}
