import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` against mosquitto's TLS listener on a private CA made by the test (`openssl`):
/// what connects, and what exits 78 at the first connect with the certificate problem in words
/// and the setting to fix.
@Suite struct RunTLSTests {
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        let requireClientCertificate: Bool
        let elsewhere: Bool
        let otherCA: Bool
        let clientCertificate: Bool
        /// `nil`: it connects; else what the error must say, and the setting it names.
        let expected: (reason: String, setting: String)?
        var description: String { name }
    }

    static let cases = [
        Case(name: "the right CA", requireClientCertificate: false, elsewhere: false, otherCA: false, clientCertificate: false, expected: nil),
        Case(name: "another CA", requireClientCertificate: false, elsewhere: false, otherCA: true, clientCertificate: false,
             expected: ("not signed by a CA in the CA file (unknown CA)", "mqtt.ca_file")),
        Case(name: "a certificate for another host name", requireClientCertificate: false, elsewhere: true, otherCA: false, clientCertificate: false,
             expected: ("not made out for the host name '127.0.0.1' (name mismatch)", "broker")),
        Case(name: "a client certificate required and given", requireClientCertificate: true, elsewhere: false, otherCA: false,
             clientCertificate: true, expected: nil),
        // TLS 1.3: the broker's refusal comes as an alert after the client's handshake, which
        // libmosquitto reports as a lost connection.
        Case(name: "a client certificate required and missing", requireClientCertificate: true, elsewhere: false, otherCA: false,
             clientCertificate: false, expected: ("the broker requires a client certificate, and none is set", "mqtt.cert_file and mqtt.key_file")),
    ]

    @Test("TLS at the first connect", arguments: cases)
    func tlsCase(_ tlsCase: Case) async throws {
        let pki = try await TLSTestCertificates.make()
        defer { pki.remove() }
        let broker = try await MosquittoBroker.start(.init(tls: pki.listener(requireClientCertificate: tlsCase.requireClientCertificate,
                                                                              elsewhere: tlsCase.elsewhere)))
        defer { broker.stop() }
        let port = try #require(broker.tlsPort)
        var yaml = "mqtt:\n  ca_file: \(tlsCase.otherCA ? pki.otherCACertificate : pki.caCertificate)\n"
        if tlsCase.clientCertificate { yaml += "  cert_file: \(pki.clientCertificate)\n  key_file: \(pki.clientKey)\n" }
        let config = pki.directory + "/ampel.yaml"
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let arguments = ["--broker", "mqtts://127.0.0.1:\(port)", "--state-dir", pki.directory + "/state", "--http", "false"]
        guard let expected = tlsCase.expected else {
            try await withDaemon(arguments, configuration: DaemonProcess.replayConfiguration + yaml) { daemon in
                try await daemon.awaitLog("subscribed")
            }
            return
        }
        let run = try await AmpelBinary.run(["run", "--config", config] + arguments)
        #expect(run.exitCode == 78, "\(tlsCase): \(run.stderrText)")
        #expect(run.stderrText.contains("Error: \(expected.setting): TLS with 127.0.0.1:\(port) failed: "), "\(tlsCase): \(run.stderrText)")
        #expect(run.stderrText.contains(expected.reason), "\(tlsCase): \(run.stderrText)")
        #expect(!run.stderrText.contains("MQTTError"), "\(run.stderrText)")
    }
}
