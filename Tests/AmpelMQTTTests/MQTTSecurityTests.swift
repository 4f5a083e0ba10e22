import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Testing

/// Credentials and TLS against a broker configured by the test.
@Suite("Authentication and TLS", .timeLimit(.minutes(1)))
struct MQTTSecurityTests {
    @Test(arguments: [MQTTConfiguration.ProtocolVersion.v311, .v5])
    func wrongPasswordIsRefusedWithAClearError(_ version: MQTTConfiguration.ProtocolVersion) async throws {
        let passwords = try await MosquittoBroker.makePasswordFile(users: ["ampel": "s3cret"])
        let broker = try await MosquittoBroker.start(.init(passwordFile: passwords))
        defer { broker.stop() }  // also keeps the broker alive to the end of the test

        var config = broker.configuration("auth-client", version)
        config.username = "ampel"
        config.password = "wrong"
        let refused = MQTTClient(configuration: config)
        do {
            try await refused.connect()
            Issue.record("connected with a wrong password")
        } catch {
            #expect(error.code == .connectionRefused)
            // MQTT 5: 0x86 bad user name or password / 0x87 not authorised; 3.1.1: 4 or 5.
            let expected: Set<Int> = version == .v5 ? [0x86, 0x87] : [4, 5]
            #expect(error.reasonCode.map(expected.contains) == true, "\(error)")
            #expect(error.message.contains("refused"))
            #expect(error.message.contains("\(broker.port)"))
        }
        // The failed client is idle, not retrying; the same client can try again.
        await #expect(throws: MQTTError.self) { try await refused.connect() }

        config.password = "s3cret"
        let accepted = MQTTClient(configuration: config)
        try await accepted.connect()
        try await accepted.publish(topic: "auth/ok", payload: bytes("ok"), qos: .atLeastOnce)
        await accepted.disconnect()

        var anonymous = broker.configuration("auth-anon", version)
        anonymous.username = nil
        await #expect(throws: MQTTError.self) { try await MQTTClient(configuration: anonymous).connect() }
    }

    @Test func tlsWithTheTestCAConnectsAndAWrongCAIsRefused() async throws {
        let pki = try await TLSTestCertificates.make()
        defer { pki.remove() }
        let broker = try await MosquittoBroker.start(.init(tls: pki.listener()))
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let tlsPort = try #require(broker.tlsPort)

        var config = MQTTConfiguration(host: "localhost", port: tlsPort, clientID: "tls-ok")
        config.tls = .init(caFile: pki.caCertificate)
        let client = MQTTClient(configuration: config)
        let inbox = MessageCollector(client)
        try await client.connect()
        try await client.subscribe([("tls/#", .atLeastOnce)])
        try await client.publish(topic: "tls/echo", payload: bytes("over tls"), qos: .atLeastOnce)
        #expect(try await inbox.wait(for: 1).map(text) == ["over tls"])
        await client.disconnect()

        var wrong = config
        wrong.clientID = "tls-wrong-ca"
        wrong.tls = .init(caFile: pki.otherCACertificate)
        do {
            try await MQTTClient(configuration: wrong).connect()
            Issue.record("connected although the broker certificate is not signed by the trusted CA")
        } catch {
            #expect(error.code == .tls, "\(error)")
            #expect(error.message.contains("TLS"))
        }

        // Host name verification is on by default: the certificate is for localhost/127.0.0.1.
        var missingFile = config
        missingFile.clientID = "tls-missing"
        missingFile.tls = .init(caFile: pki.directory + "/does-not-exist.pem")
        await #expect(throws: MQTTError.self) { try await MQTTClient(configuration: missingFile).connect() }

        // Plain MQTT against the TLS port fails rather than hanging.
        var plain = config
        plain.clientID = "tls-plain"
        plain.tls = nil
        plain.keepAlive = .seconds(5)
        await #expect(throws: MQTTError.self) { try await MQTTClient(configuration: plain).connect() }
    }

    @Test func clientCertificateWhenTheBrokerRequiresOne() async throws {
        let pki = try await TLSTestCertificates.make()
        defer { pki.remove() }
        let broker = try await MosquittoBroker.start(.init(tls: pki.listener(requireClientCertificate: true)))
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let tlsPort = try #require(broker.tlsPort)

        var config = MQTTConfiguration(host: "127.0.0.1", port: tlsPort, clientID: "tls-cert")
        config.tls = .init(caFile: pki.caCertificate, certFile: pki.clientCertificate, keyFile: pki.clientKey)
        let client = MQTTClient(configuration: config)
        try await client.connect()
        await client.disconnect()

        var without = config
        without.clientID = "tls-nocert"
        without.tls = .init(caFile: pki.caCertificate)
        await #expect(throws: MQTTError.self) { try await MQTTClient(configuration: without).connect() }
    }
}
