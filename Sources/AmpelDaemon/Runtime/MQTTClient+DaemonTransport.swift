import AmpelMessages
import AmpelData
import AmpelMQTT
import Foundation
import Logging

/// `AmpelMQTT.MQTTClient` is the daemon's ``DaemonTransport`` itself: a publish goes from the
/// executor to the client's `enqueue`, a message from the client's network thread to the
/// daemon's queue, with no adapter between them that would only pass the call on.
extension MQTTClient: DaemonTransport {
    /// The client configuration for a daemon that must not lose a location: a fixed client id
    /// with a persistent session (QoS 1 messages queued by the broker while the daemon is
    /// away), a large receive buffer (libmosquitto acknowledges on receipt, so a message dropped
    /// from the buffer would be lost), and the Last Will `{"state":"offline"}` on `bridge/state`.
    static func daemonConfiguration(_ configuration: DaemonConfiguration) throws -> MQTTConfiguration {
        let broker = configuration.broker
        var mqtt = try MQTTConfiguration(brokers: broker, clientID: configuration.mqtt.clientID,
                                         caFile: configuration.mqtt.caFile ?? DaemonConfiguration.MQTTSettings.systemCAFile)
        mqtt.protocolVersion = configuration.mqtt.protocolVersion
        mqtt.keepAlive = configuration.mqtt.keepAlive
        mqtt.cleanStart = false
        mqtt.sessionExpiry = max(.seconds(1), configuration.mqtt.sessionExpiry)
        mqtt.username = configuration.mqtt.username ?? broker.username
        mqtt.password = configuration.mqtt.password ?? broker.password
        mqtt.tls?.certFile = configuration.mqtt.certFile
        mqtt.tls?.keyFile = configuration.mqtt.keyFile
        let topics = configuration.topics
        mqtt.will = MQTTWill(topic: topics.bridgeState, payload: Array(BridgeState.offline.utf8), qos: .atLeastOnce, retain: true)
        mqtt.incomingBufferSize = 1_000_000
        mqtt.receiveMaximum = 1000
        mqtt.maxInflight = 1000
        // The network thread runs the daemon's loop (decision 27): it is the busy thread, not a
        // helper that a publisher wakes, so `SCHED_BATCH` only delays it after each sleep.
        mqtt.networkThreadPolicy = .normal
        return mqtt
    }

    var loopExecutor: (any TaskExecutor)? { taskExecutor }

    /// Reads the client's connection events (one stream, read here only). The reading task ends
    /// with the stream, when the client disconnects.
    func connections(_ connected: @escaping @Sendable (_ sessionPresent: Bool) -> Void, lost: @escaping @Sendable (_ failure: String?) -> Void) {
        let events = self.events
        Task {
            for await event in events {
                switch event {
                case .connected(let sessionPresent): connected(sessionPresent)
                case .disconnected: lost(nil)
                case .reconnectFailed(let reason): lost(reason.message)
                }
            }
        }
    }

    func connectToBroker() async throws {
        do {
            try await connect()
        } catch {
            // Retrying cannot help with wrong settings or credentials.
            let fatal: [MQTTError.Code] = [.invalidConfiguration, .connectionRefused, .authentication]
            // 0x84 (MQTT 5) or 1 (3.1.1): the broker does not speak the protocol level asked for.
            if error.code == .connectionRefused, configuration.protocolVersion == .v5, error.reasonCode == 0x84 || error.reasonCode == 1 {
                throw FatalConnectError(error: MQTTError(
                    code: error.code, reasonCode: error.reasonCode,
                    message: error.message + "; the broker does not speak MQTT 5 (nats-server speaks 3.1.1 only): set mqtt.protocol: \"3.1.1\""))
            }
            // A refusal for the settings' sake names the setting (exit 78); one for the broker's
            // own state (busy, unavailable) is retried like a broker that is away.
            if error.code == .connectionRefused, let reason = error.reasonCode {
                if let wrong = Self.settingRefused(reason, protocolVersion: configuration.protocolVersion, error: error,
                                                   username: configuration.username, clientCertificate: configuration.tls?.certFile != nil) {
                    throw wrong
                }
                if Self.transientRefusals(configuration.protocolVersion).contains(reason) { throw error }
            }
            // A broker that requires a client certificate none is set for closes a TLS 1.3
            // connection after the handshake: libmosquitto sees a lost connection, or its read
            // fails with EPROTO ("Protocol error"), not a TLS error.
            let tlsLoss = (error.code == .connectionLost || error.code == .system) && configuration.tls != nil
                && configuration.tls?.certFile == nil
            if error.code == .tls || tlsLoss, let wrong = Self.tlsRefused(error, configuration: configuration) { throw wrong }
            if fatal.contains(error.code) { throw FatalConnectError(error: error) }
            // RabbitMQ before 3.13 cannot parse an MQTT 5 CONNECT and closes the connection
            // without a CONNACK: a lost connection, retried, with no word of the protocol. A drop
            // before the CONNACK has other causes too, so this stays a hint on the retried error.
            if error.code == .connectionLost, configuration.protocolVersion == .v5 {
                throw MQTTError(code: error.code, reasonCode: error.reasonCode, message: error.message
                    + " (before the broker's CONNACK: a broker that speaks only MQTT 3.1.1, such as RabbitMQ before 3.13, does this; then set mqtt.protocol: \"3.1.1\")")
            }
            throw error
        }
    }

    func subscribe(_ filters: [String], qos: MQTTQoS) async throws {
        guard !filters.isEmpty else { return }
        try await subscribe(filters.map { ($0, qos) })
    }

    func subscribeAnswers(_ filters: [String]) async throws -> [MQTTSubscriptionAnswer] {
        try await subscribeAnswers(filters.map { ($0, .atLeastOnce) })
    }

    // `publish(_:)`, `enqueue(_:acknowledged:)`, `unsubscribe(_:)`, `unanswered`,
    // `waitForAnswers(atMost:)`, `pauseReading()`, `resumeReading()` and `deliver(to:)` are the
    // client's own. A message goes over as the engine made it: the engine adds an expiry only
    // on MQTT 5 (``AmpelDaemon/settings(_:ruleSet:)``), and the client checks topic and expiry.

    var brokerInUse: String? { connectedBroker?.description }
    var failovers: Int { counters.failovers }

    func shutdown(clean: Bool) async {
        if clean { await disconnect() } else { await abort() }
    }
}

extension MQTTClient {
    /// The CONNACK reasons that say the broker cannot take the connection now (unavailable,
    /// busy, over its quota or connection rate, moved): retried.
    static func transientRefusals(_ version: MQTTConfiguration.ProtocolVersion) -> Set<Int> {
        version == .v5 ? [0x88, 0x89, 0x97, 0x9C, 0x9D, 0x9F] : [3]
    }

    /// The certificate problem of a failed TLS connect, in words, as a configuration error
    /// naming the setting (exit 78 at the first connect); `nil` when the certificates are not
    /// the cause (the broker was away), which is retried.
    static func tlsRefused(_ error: MQTTError, configuration: MQTTConfiguration) -> ConfigurationError? {
        guard let tls = configuration.tls else { return nil }
        let broker = configuration.endpoints[0]
        // libmosquitto's own words first (a client certificate the broker requires or refuses
        // shows there only), then libcurl's handshake for which check failed.
        let ownWords = TLSHandshake.classify(error.message, host: broker.host)
        let failure = ownWords.flatMap { $0.setting == "mqtt.ca_file" ? nil : $0 }
            ?? TLSHandshake.failure(host: broker.host, port: broker.port, caFile: tls.caFile, certFile: tls.certFile, keyFile: tls.keyFile)
            ?? ownWords
        guard let failure else { return nil }
        return ConfigurationError(key: failure.setting, line: nil, message: "TLS with \(broker) failed: \(failure.reason)")
    }

    /// The setting a CONNACK refusal points at, as a configuration error (exit 78 at the first
    /// connect); `nil` for a refusal no setting explains.
    static func settingRefused(_ reason: Int, protocolVersion: MQTTConfiguration.ProtocolVersion, error: MQTTError,
                               username: String?, clientCertificate: Bool) -> ConfigurationError? {
        let v5 = protocolVersion == .v5
        let credentials = "mqtt.username (or AMPEL_MQTT_USERNAME, or the user in the broker URL) and AMPEL_MQTT_PASSWORD"
            + (clientCertificate ? ", or mqtt.cert_file and mqtt.key_file" : "")
        let who = username.map { "user '\($0)'" } ?? "a client without a user name"
        switch (v5, reason) {
        case (true, 0x86), (false, 4):
            return ConfigurationError(key: credentials, line: nil,
                                      message: "\(error.message): the broker does not accept the user name or password (\(who))")
        case (true, 0x87), (false, 5), (true, 0x8C):
            return ConfigurationError(key: credentials, line: nil,
                                      message: "\(error.message): the broker does not let \(who) connect (its password file or ACL)")
        case (true, 0x85), (false, 2):
            return ConfigurationError(key: "mqtt.client_id", line: nil, message: "\(error.message): the broker rejects the client id")
        case (true, 0x8A):
            return ConfigurationError(key: "mqtt.client_id", line: nil,
                                      message: "\(error.message): the broker has banned this client (its ban list; or another mqtt.client_id)")
        default:
            return nil
        }
    }
}

/// A connection failure that retrying cannot fix (bad settings, refused credentials).
struct FatalConnectError: Error, CustomStringConvertible {
    let error: MQTTError
    var description: String { "\(error)" }
}
