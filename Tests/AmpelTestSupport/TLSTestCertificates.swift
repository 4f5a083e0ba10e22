import Foundation

/// A throw-away PKI for TLS tests, made with the `openssl` command line tool in a temp dir:
/// a CA, a server certificate for `localhost` / `127.0.0.1` signed by it, a client certificate
/// signed by it, and an unrelated second CA that must not be trusted.
///
/// ```swift
/// let pki = try await TLSTestCertificates.make()
/// let broker = try await MosquittoBroker.start(.init(tls: pki.listener()))
/// ```
public struct TLSTestCertificates: Sendable {
    public let directory: String
    public let caCertificate: String
    public let serverCertificate: String
    public let serverKey: String
    public let clientCertificate: String
    public let clientKey: String
    /// A CA that signed nothing the broker uses: verifying against it must fail.
    public let otherCACertificate: String
    /// A server certificate signed by the CA for another host (`elsewhere.invalid` only): a
    /// client connecting to `127.0.0.1` must refuse it by name.
    public let elsewhereCertificate: String
    public let elsewhereKey: String

    /// The broker side of these certificates.
    public func listener(requireClientCertificate: Bool = false, elsewhere: Bool = false) -> MosquittoBroker.TLSListener {
        MosquittoBroker.TLSListener(
            caFile: caCertificate, certFile: elsewhere ? elsewhereCertificate : serverCertificate, keyFile: elsewhere ? elsewhereKey : serverKey,
            requireClientCertificate: requireClientCertificate)
    }

    /// Creates the files (RSA 2048, valid 2 days). Takes about a second.
    public static func make(openssl: String = "/usr/bin/openssl") async throws -> TLSTestCertificates {
        let dir = try MosquittoBroker.makeTemporaryDirectory(prefix: "ampel-tls")
        func path(_ name: String) -> String { dir + "/" + name }
        func run(_ arguments: [String]) async throws { try await MosquittoBroker.runTool(openssl, arguments) }

        try await makeCA(name: "Ampel Test CA", key: path("ca.key"), cert: path("ca.pem"), run: run)
        try await makeCA(name: "Ampel Other CA", key: path("other-ca.key"), cert: path("other-ca.pem"), run: run)

        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
            .write(toFile: path("server.ext"), atomically: true, encoding: .utf8)
        try "extendedKeyUsage=clientAuth\n".write(toFile: path("client.ext"), atomically: true, encoding: .utf8)
        try "subjectAltName=DNS:elsewhere.invalid\nextendedKeyUsage=serverAuth\n".write(toFile: path("elsewhere.ext"), atomically: true, encoding: .utf8)
        for (name, commonName) in [("server", "localhost"), ("client", "ampel-test-client"), ("elsewhere", "elsewhere.invalid")] {
            try await run(["genrsa", "-out", path("\(name).key"), "2048"])
            try await run(["req", "-new", "-key", path("\(name).key"), "-subj", "/CN=\(commonName)", "-out", path("\(name).csr")])
            try await run([
                "x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-days", "2", "-sha256", "-extfile", path("\(name).ext"), "-out", path("\(name).pem"),
            ])
        }
        return TLSTestCertificates(
            directory: dir, caCertificate: path("ca.pem"), serverCertificate: path("server.pem"), serverKey: path("server.key"),
            clientCertificate: path("client.pem"), clientKey: path("client.key"), otherCACertificate: path("other-ca.pem"),
            elsewhereCertificate: path("elsewhere.pem"), elsewhereKey: path("elsewhere.key"))
    }

    private static func makeCA(
        name: String, key: String, cert: String, run: ([String]) async throws -> Void
    ) async throws {
        try await run(["genrsa", "-out", key, "2048"])
        try await run([
            "req", "-x509", "-new", "-key", key, "-sha256", "-days", "2", "-subj", "/CN=\(name)",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-out", cert,
        ])
    }

    /// Removes the directory with all keys.
    public func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}
