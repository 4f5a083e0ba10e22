import Testing

@testable import AmpelMQTT

@Suite("Broker URLs")
struct MQTTBrokerURLTests {
    @Test func plainURLWithDefaultPort() throws {
        let url = try MQTTBrokerURL("mqtt://broker.local")
        #expect(url.host == "broker.local")
        #expect(url.port == 1883)
        #expect(url.usesTLS == false)
        #expect(url.username == nil && url.password == nil)
    }

    @Test func tlsURLWithDefaultPort() throws {
        let url = try MQTTBrokerURL("mqtts://broker.local")
        #expect(url.port == 8883)
        #expect(url.usesTLS)
    }

    @Test func credentialsPortAndPercentEncoding() throws {
        let url = try MQTTBrokerURL("mqtt://amp%40el:p%3Ass@10.0.0.5:1884/")
        #expect(url.host == "10.0.0.5")
        #expect(url.port == 1884)
        #expect(url.username == "amp@el")
        #expect(url.password == "p:ss")
    }

    @Test func userWithoutPassword() throws {
        let url = try MQTTBrokerURL("mqtt://ampel@host")
        #expect(url.username == "ampel")
        #expect(url.password == nil)
    }

    @Test func ipv6Host() throws {
        let url = try MQTTBrokerURL("mqtt://[::1]:1999")
        #expect(url.host == "::1")
        #expect(url.port == 1999)
        #expect(try MQTTBrokerURL("mqtts://[fe80::1]").port == 8883)
    }

    @Test(arguments: [
        "broker.local", "http://broker", "mqtt://", "mqtt://:1883", "mqtt://host:0", "mqtt://host:65536",
        "mqtt://host:abc", "mqtt://host:", "mqtt://host/topic", "mqtt://host?x=1", "mqtt://@host",
        "mqtt://[::1", "mqtt://a:b:1883", "mqtt://us%zzer@host", "mqtt://host:-1", "mqtt://ho st",
    ])
    func badURLsGiveAClearError(_ text: String) {
        do {
            _ = try MQTTBrokerURL(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.code == .invalidURL)
            #expect(error.message.contains(text))
            #expect(error.message.contains("expected mqtt://"))
        }
    }

    @Test func configurationFromURL() throws {
        let config = try MQTTConfiguration(url: "mqtt://u:p@h:1234", clientID: "c")
        #expect(config.host == "h" && config.port == 1234 && config.username == "u" && config.password == "p")
        #expect(config.tls == nil)
        let tls = try MQTTConfiguration(url: "mqtts://h", clientID: "c", caFile: "/ca.pem")
        #expect(tls.tls?.caFile == "/ca.pem")
        #expect(tls.tls?.verifyPeer == true)
        #expect(throws: MQTTError.self) { try MQTTConfiguration(url: "mqtts://h", clientID: "c") }
    }
}
