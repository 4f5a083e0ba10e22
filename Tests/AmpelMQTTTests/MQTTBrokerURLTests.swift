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
        // A fragment, an empty user before a password, and host names no resolver can look up.
        "mqtt://host#x", "mqtt://:secret@host", "mqtt://bro<ker", "mqtt://b\u{FC}cher.example", "mqtt://host|x", "mqtt://[::1<]",
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

    @Test func schemesHostsAndPasswordsAUserWouldWrite() throws {
        #expect(try MQTTBrokerURL("MQTT://Broker-1.example_net:1884") == MQTTBrokerURL(host: "Broker-1.example_net", port: 1884, usesTLS: false))
        #expect(try MQTTBrokerURL("tcp://h").usesTLS == false)
        #expect(try MQTTBrokerURL("ssl://h").usesTLS)
        #expect(try MQTTBrokerURL("tls://h:1").port == 1)
        // The last '@' ends the user info: a password may contain '@' unencoded.
        #expect(try MQTTBrokerURL("mqtt://u:p@ss@h").password == "p@ss")
        #expect(try MQTTBrokerURL("mqtt://[fe80::1%eth0]:1884").host == "fe80::1%eth0")
        #expect(try MQTTBrokerURL("mqtt://[fe80::1%25eth0]").host == "fe80::1%eth0")
    }

    @Test func descriptionNamesTheBrokerWithoutCredentials() throws {
        #expect(try MQTTBrokerURL("mqtts://u:secret@h").description == "mqtts://h:8883")
        #expect(try MQTTBrokerURL("mqtt://[::1]").description == "mqtt://[::1]:1883")
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
