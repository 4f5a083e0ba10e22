/// Everything the client needs to reach and talk to one broker.
///
/// The defaults suit a long-running daemon: MQTT 5, clean start, 30 s keep-alive, reconnect
/// between 0.5 s and 30 s, 100 QoS 1 messages in flight each way, and room for 10 000
/// received messages that the consumer has not read yet.
///
/// ```swift
/// var config = try MQTTConfiguration(url: "mqtts://ampel:secret@broker.local", clientID: "ampel-1")
/// config.tls = .init(caFile: "/etc/ampel/ca.pem")
/// config.will = MQTTWill(topic: "ampel/status", payload: Array("offline".utf8), retain: true)
/// let client = MQTTClient(configuration: config)
/// try await client.connect()
/// ```
///
/// > Note: An MQTT 5 persistent session (`cleanStart = false`) only survives a disconnect if
/// > ``sessionExpiry`` is set; ``MQTTClient/connect()`` rejects the combination without it.
public struct MQTTConfiguration: Sendable, Hashable {
    /// The MQTT protocol level spoken on the wire.
    public enum ProtocolVersion: Sendable, Hashable {
        case v311
        case v5
    }

    /// Certificate-based TLS. Verification of the broker certificate and its host name is on
    /// unless ``verifyPeer`` is switched off (tests only).
    public struct TLS: Sendable, Hashable {
        /// PEM file with the CA certificate(s) that signed the broker certificate.
        public var caFile: String
        /// PEM client certificate, for brokers that require one (`require_certificate true`).
        public var certFile: String?
        /// PEM private key of ``certFile`` (unencrypted).
        public var keyFile: String?
        /// Check the broker certificate chain and host name. Default true.
        public var verifyPeer: Bool

        public init(caFile: String, certFile: String? = nil, keyFile: String? = nil, verifyPeer: Bool = true) {
            self.caFile = caFile
            self.certFile = certFile
            self.keyFile = keyFile
            self.verifyPeer = verifyPeer
        }
    }

    /// What happens to a received message when ``incomingBufferSize`` messages are already waiting.
    ///
    /// Both policies count the dropped message in ``MQTTCounters/droppedOnOverflow``. There is
    /// deliberately no "block" policy: stalling libmosquitto's network thread would also stall
    /// the acknowledgements a consumer may be awaiting, and keep-alive with them.
    public enum OverflowPolicy: Sendable, Hashable {
        /// Drop the oldest waiting message (the consumer sees the newest state).
        case dropOldest
        /// Drop the message that just arrived (the consumer sees the oldest messages first).
        case dropNewest
    }

    /// How the operating system schedules the client's network thread.
    public enum NetworkThreadPolicy: Sendable, Hashable {
        /// Linux `SCHED_BATCH`: waking the network thread (a publish while it sleeps, data from
        /// the broker) does not preempt the thread that is running; it runs at once on an idle
        /// CPU, otherwise at the next scheduler tick. Fewer context switches under load
        /// (docs/mqtt-client.md); the default.
        case batch
        /// The normal class (`SCHED_OTHER`): a woken network thread may preempt at once, for the
        /// lowest latency on a saturated machine at the cost of throughput.
        case normal
    }

    /// One broker's address.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    public var host: String
    public var port: Int
    /// Further nodes of the same cluster, tried in order after ``host``:``port``: the first
    /// `connect()` takes the first that answers; after a lost connection each attempt goes to
    /// the next one (round the end of the list), with the reconnect backoff between attempts.
    /// They share TLS settings, credentials, client id and session with the first.
    public var failover: [Endpoint] = []
    /// ``host``:``port`` and then ``failover``: every broker the client may use, in order.
    public var endpoints: [Endpoint] { [Endpoint(host: host, port: port)] + failover }
    /// The client identifier. Must be unique per broker; a second client with the same id
    /// takes the session over. Must not be empty for a persistent session.
    public var clientID: String
    public var protocolVersion: ProtocolVersion = .v5
    /// Interval in which the client sends at least one packet (PINGREQ if idle); 5 s or more.
    public var keepAlive: Duration = .seconds(30)
    /// True: start with a fresh session. False: resume the broker-side session (subscriptions and
    /// QoS 1 messages queued while away). For MQTT 3.1.1 this is the clean-session flag.
    public var cleanStart: Bool = true
    /// MQTT 5: how long the broker keeps the session after the connection ends. `nil` sends no
    /// property, which the broker reads as zero: the session ends with the connection.
    /// Ignored for MQTT 3.1.1, where a non-clean session lives until the broker removes it.
    public var sessionExpiry: Duration?
    public var username: String?
    public var password: String?
    /// TLS settings; nil for a plain TCP connection.
    public var tls: TLS?
    public var will: MQTTWill?
    /// First delay before reconnecting after the connection was lost; doubles each failed attempt.
    public var reconnectMinDelay: Duration = .milliseconds(500)
    /// Upper bound of the reconnect delay.
    public var reconnectMaxDelay: Duration = .seconds(30)
    /// Send maximum: QoS 1/2 publishes in flight (not yet acknowledged) at once; more are queued
    /// inside libmosquitto. A broker's smaller receive maximum (MQTT 5) wins.
    public var maxInflight: Int = 100
    /// Receive maximum (MQTT 5): QoS 1/2 messages the broker may have in flight to this client.
    public var receiveMaximum: Int = 100
    /// Received messages kept for the consumer of ``MQTTClient/messages`` before the
    /// ``overflowPolicy`` drops some.
    public var incomingBufferSize: Int = 10_000
    public var overflowPolicy: OverflowPolicy = .dropOldest
    /// QoS 1/2 publishes kept while disconnected, sent in order after the reconnect; a publish
    /// beyond this fails with ``MQTTError/Code/offlineQueueFull`` instead of growing memory
    /// without bound during a long broker outage.
    public var offlineQueueLimit: Int = 100_000
    /// Scheduling class of the network thread; see ``NetworkThreadPolicy``.
    public var networkThreadPolicy: NetworkThreadPolicy = .batch

    /// A configuration for `host:port` with the defaults described on the type.
    public init(host: String, port: Int = 1883, clientID: String) {
        self.host = host
        self.port = port
        self.clientID = clientID
    }

    /// A configuration from a broker URL `mqtt://[user:pass@]host[:port]` or `mqtts://...`.
    ///
    /// `mqtts` sets ``tls`` to verify against the CA file at `caFile` (which must then be given).
    /// - Throws: ``MQTTError`` with code ``MQTTError/Code/invalidURL`` for a malformed URL.
    public init(url: String, clientID: String, caFile: String? = nil) throws(MQTTError) {
        let parsed = try MQTTBrokerURL(url)
        self.init(host: parsed.host, port: parsed.port, clientID: clientID)
        self.username = parsed.username
        self.password = parsed.password
        if parsed.usesTLS {
            guard let caFile else {
                throw MQTTError(code: .invalidConfiguration, message: "\(url): mqtts:// needs a CA file to verify the broker")
            }
            self.tls = TLS(caFile: caFile)
        }
    }

    /// A configuration for every broker of `brokers`, the first as ``host``:``port``, the
    /// others as ``failover``; `mqtts` lists verify against the CA file at `caFile`.
    /// - Throws: ``MQTTError`` with code ``MQTTError/Code/invalidConfiguration`` for `mqtts`
    ///   without a CA file.
    public init(brokers: MQTTBrokerList, clientID: String, caFile: String? = nil) throws(MQTTError) {
        let first = brokers.first
        self.init(host: first.host, port: first.port, clientID: clientID)
        failover = brokers.urls.dropFirst().map { Endpoint(host: $0.host, port: $0.port) }
        username = brokers.username
        password = brokers.password
        if brokers.usesTLS {
            guard let caFile else {
                throw MQTTError(code: .invalidConfiguration, message: "\(brokers): mqtts:// needs a CA file to verify the broker")
            }
            tls = TLS(caFile: caFile)
        }
    }

    /// Checks the combinations libmosquitto would accept but that would not do what was meant.
    func validate() throws(MQTTError) {
        func bad(_ text: String) -> MQTTError { MQTTError(code: .invalidConfiguration, message: text) }
        for endpoint in endpoints {
            if endpoint.host.isEmpty { throw bad("host is empty") }
            if !(1...65535).contains(endpoint.port) { throw bad("port \(endpoint.port) is outside 1...65535") }
        }
        if !cleanStart && clientID.isEmpty { throw bad("a persistent session (cleanStart = false) needs a client id") }
        if protocolVersion == .v5 && !cleanStart && (sessionExpiry ?? .zero) <= .zero {
            throw bad("MQTT 5 persistent session (cleanStart = false) needs sessionExpiry > 0, otherwise the broker ends the session with the connection")
        }
        if keepAlive < .seconds(5) { throw bad("keepAlive must be at least 5 s (libmosquitto's minimum)") }
        if keepAlive > .seconds(65535) { throw bad("keepAlive must be at most 65535 s") }
        if reconnectMinDelay <= .zero || reconnectMaxDelay < reconnectMinDelay {
            throw bad("reconnect delays need 0 < reconnectMinDelay <= reconnectMaxDelay")
        }
        if !(1...65535).contains(maxInflight) { throw bad("maxInflight must be in 1...65535") }
        if !(1...65535).contains(receiveMaximum) { throw bad("receiveMaximum must be in 1...65535") }
        if incomingBufferSize < 1 { throw bad("incomingBufferSize must be at least 1") }
        if offlineQueueLimit < 1 { throw bad("offlineQueueLimit must be at least 1") }
        if password != nil && username == nil { throw bad("a password needs a username") }
        if let tls, (tls.certFile == nil) != (tls.keyFile == nil) {
            throw bad("TLS client certificate and key must be given together")
        }
        if let will {
            if let error = MQTTTopicFilter.validateTopicName(will.topic) { throw error }
        }
    }
}

/// A parsed broker URL: `mqtt://[user[:pass]@]host[:port]` (default port 1883) or
/// `mqtts://...` (TLS, default port 8883). IPv6 hosts are written in brackets (`[::1]`).
/// User and password may be percent-encoded.
///
/// `ampel run` and `ampel lamp` both parse `--broker` with this type, so one URL means the same
/// broker to both. The ``description`` leaves the credentials out: it is meant for logs.
public struct MQTTBrokerURL: Sendable, Hashable, CustomStringConvertible {
    public typealias Endpoint = MQTTConfiguration.Endpoint

    public var host: String
    public var port: Int
    /// Further nodes of the same cluster (``MQTTConfiguration/failover``).
    public var failover: [Endpoint] = []
    /// ``host``:``port`` and then ``failover``.
    public var endpoints: [Endpoint] { [Endpoint(host: host, port: port)] + failover }
    public var username: String?
    public var password: String?
    public var usesTLS: Bool

    public init(host: String, port: Int, usesTLS: Bool, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.usesTLS = usesTLS
        self.username = username
        self.password = password
    }

    /// `mqtt://host:port` or `mqtts://host:port`, IPv6 hosts in brackets; never the credentials.
    public var description: String {
        "\(usesTLS ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    /// - Throws: ``MQTTError`` with code ``MQTTError/Code/invalidURL`` and a message naming the problem.
    public init(_ string: String) throws(MQTTError) {
        func bad(_ why: String) -> MQTTError {
            MQTTError(code: .invalidURL, message: "invalid broker URL '\(string)': \(why) (expected mqtt://[user:pass@]host[:port] or mqtts://...)")
        }
        guard let schemeEnd = string.firstRange(of: "://") else { throw bad("missing scheme") }
        let scheme = string[..<schemeEnd.lowerBound].lowercased()
        switch scheme {
        case "mqtt", "tcp": usesTLS = false
        case "mqtts", "ssl", "tls": usesTLS = true
        default: throw bad("unknown scheme '\(scheme)'")
        }
        var rest = Substring(string[schemeEnd.upperBound...])
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains("/") || rest.contains("?") || rest.contains("#") {
            throw bad("a path, query or fragment is not allowed")
        }
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user: Substring
            if let colon = userInfo.firstIndex(of: ":") {
                user = userInfo[..<colon]
                guard let pass = Self.percentDecode(userInfo[userInfo.index(after: colon)...]) else {
                    throw bad("bad percent-encoding in password")
                }
                password = pass
            } else {
                user = userInfo
                password = nil
            }
            guard let decodedUser = Self.percentDecode(user), !decodedUser.isEmpty else {
                throw bad("empty or badly encoded user name")
            }
            username = decodedUser
        } else {
            username = nil
            password = nil
        }
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("unclosed '[' in IPv6 host") }
            // A zone written as URLs encode it (RFC 6874: `[fe80::1%25eth0]`) is the resolver's `fe80::1%eth0`.
            host = String(rest[rest.index(after: rest.startIndex)..<close]).replacing("%25", with: "%")
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("unexpected text after IPv6 host") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        if host.isEmpty { throw bad("empty host") }
        // Only what a resolver can look up: a host that no lookup can find would otherwise
        // pass here and fail later on every reconnect attempt, far from the typo.
        let bracketed = rest.hasPrefix("[")
        let allowed: (Character) -> Bool = bracketed
            ? { $0.isASCII && ($0.isLetter || $0.isNumber || ":.%-_".contains($0)) }  // IPv6, optionally with a zone
            : { $0.isASCII && ($0.isLetter || $0.isNumber || "-._".contains($0)) }
        if !host.allSatisfy(allowed) {
            throw bad("bad character in host '\(host)' (a host name is ASCII letters, digits, '-', '.' and '_'; an IPv6 address goes in brackets)")
        }
        if let portText {
            guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(portText),
                (1...65535).contains(value)
            else { throw bad("port '\(portText)' is not a number in 1...65535") }
            port = value
        } else {
            port = usesTLS ? 8883 : 1883
        }
    }

    private static func percentDecode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
