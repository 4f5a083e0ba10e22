import Foundation

/// `http`: the status page, the JSON API, `/metrics` and the health checks of `ampel run`
/// (docs/http.md), and `devices.forget_after`.
extension DaemonConfiguration {
    package struct HTTPSettings: Sendable, Hashable {
        /// Where the server listens; `nil` (`false` in the file) for no server.
        package var listen: HTTPListenAddress? = HTTPListenAddress(host: "127.0.0.1", port: 8080)
        /// Credentials every route but `/healthz` and `/readyz` asks for once any is set;
        /// required when ``listen`` is not a loopback address.
        var auth = HTTPAuth()
        /// Device positions in the API and on the page; off by default, as they are personal data.
        var showPositions = false
    }

    /// A bearer token and/or a user name and password (HTTP Basic), each secret from the
    /// environment only: `AMPEL_HTTP_TOKEN`, `AMPEL_HTTP_PASSWORD` (the user name may be in the file).
    struct HTTPAuth: Sendable, Hashable {
        var token: String?
        var username: String?
        var password: String?

        init(token: String? = nil, username: String? = nil, password: String? = nil) {
            self.token = token
            self.username = username
            self.password = password
        }

        /// Whether any credential is set: then every protected route asks for it.
        var isConfigured: Bool { token != nil || basic != nil }

        /// The Basic credentials, when both halves are set.
        var basic: (username: String, password: String)? {
            guard let username, let password else { return nil }
            return (username, password)
        }
    }

    /// Checks what the file, the variables and the flags only decide together: a server that
    /// others can reach must ask for credentials, and Basic needs both halves.
    func validateHTTP() throws(ConfigurationError) {
        guard let listen = http.listen else { return }
        if http.auth.username != nil, http.auth.password == nil {
            throw ConfigurationError(key: "http.auth.username", line: nil, message: "Basic auth needs its password in AMPEL_HTTP_PASSWORD")
        }
        if http.auth.password != nil, http.auth.username == nil {
            // Set for a reason: silently ignored, it would leave the server open on loopback.
            throw ConfigurationError(key: "http.auth.username", line: nil, message: "AMPEL_HTTP_PASSWORD is set but no user name: set http.auth.username or AMPEL_HTTP_USERNAME")
        }
        if !listen.isLoopback, !http.auth.isConfigured {
            throw ConfigurationError(
                key: "http.auth", line: nil,
                message: "http.listen \(listen) is not a loopback address: device positions are personal data, so set AMPEL_HTTP_TOKEN (bearer) or http.auth.username with AMPEL_HTTP_PASSWORD (Basic), or listen on 127.0.0.1")
        }
    }

    mutating func readHTTP(_ m: MappingReader) throws(ConfigurationError) {
        try m.allow(["listen", "auth", "show_positions"])
        if let v = m["listen"] { http.listen = try v.unlessOff(Self.listenAddress) }
        if let v = m["show_positions"] { http.showPositions = try v.bool() }
        if let a = try m.mapping("auth") {
            // Secrets stay out of the file, which is often world-readable and kept in git.
            try a.allow(["username"])
            if let v = a["username"] { http.auth.username = try v.nonEmptyString() }
        }
    }

    /// `host:port`, `[v6]:port`, or a bare port (on 127.0.0.1).
    static func listenAddress(_ text: String) throws(ConfigurationError.Problem) -> HTTPListenAddress {
        let problem = ConfigurationError.Problem("'\(text)' is not host:port (127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080) or false")
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let port = Int(trimmed), (0...65_535).contains(port) { return HTTPListenAddress(host: "127.0.0.1", port: port) }
        guard let colon = trimmed.lastIndex(of: ":"), let port = Int(trimmed[trimmed.index(after: colon)...]), (0...65_535).contains(port) else {
            throw problem
        }
        var host = String(trimmed[..<colon])
        if host.hasPrefix("[") {
            guard host.hasSuffix("]"), host.count > 2 else { throw problem }
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            throw problem
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "/" }) else { throw problem }
        return HTTPListenAddress(host: host, port: port)
    }
}

/// Where the HTTP server listens.
package struct HTTPListenAddress: Sendable, Hashable, CustomStringConvertible {
    var host: String
    /// 0 asks the system for a free port (tests); the log names the one it gave.
    var port: Int

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Reachable from this machine only: `127.0.0.0/8`, `::1`, `localhost`. A name that might
    /// resolve elsewhere (or `0.0.0.0`) is not.
    var isLoopback: Bool {
        let lower = host.lowercased()
        if lower == "localhost" || lower == "::1" { return true }
        let parts = lower.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
