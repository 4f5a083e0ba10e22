import AmpelMQTT
import Foundation
import Logging
import Synchronization

/// `AmpelMQTT.MQTTClient` as the daemon's ``DaemonTransport``.
///
/// The client is configured for a daemon that must not lose a location: a fixed client id
/// with a persistent session (QoS 1 messages queued by the broker while the daemon is away),
/// a large receive buffer (libmosquitto acknowledges on receipt, so a message dropped from
/// the buffer would be lost), and the Last Will `{"state":"offline"}` on `bridge/state`.
public final class MQTTTransport: DaemonTransport {
    public let client: MQTTClient
    let sink: Sink
    let logger: Logger

    /// Where received messages go: set by ``deliver(to:)`` before connecting.
    ///
    /// The closure sits in a class, not directly in the `Mutex`: a function value read and
    /// written back through the generic `inout` of `withLock` is re-abstracted on each access,
    /// and the thunks pile up (one pair per message, until the stack overflowed).
    final class Sink: Sendable {
        final class Target: Sendable {
            let deliver: @Sendable (MQTTMessage) -> Void
            init(_ deliver: @escaping @Sendable (MQTTMessage) -> Void) { self.deliver = deliver }
        }
        let target = Mutex<Target?>(nil)
    }

    /// Where lost connections are reported (``disconnections(_:)``); rare, so a plain closure.
    final class Lost: Sendable {
        let target = Mutex<(@Sendable () -> Void)?>(nil)
    }
    let lost = Lost()

    /// A transport on a new client for `configuration`. The client hands each message from its
    /// network thread straight to the daemon's queue (one hand-off, no second buffer).
    public init(configuration: MQTTConfiguration, logger: Logger) {
        let sink = Sink()
        self.sink = sink
        self.logger = logger
        client = MQTTClient(configuration: configuration, logger: logger) { message in
            let target = sink.target.withLock { $0 }
            target?.deliver(message)
        }
    }

    public func deliver(to target: @escaping @Sendable (MQTTMessage) -> Void) {
        let boxed = Sink.Target(target)
        sink.target.withLock { $0 = boxed }
    }

    /// Reads the client's connection events (one stream, read here only) and reports each CONNACK.
    /// The reading task ends with the stream, when the client disconnects.
    public func connections(_ target: @escaping @Sendable (_ sessionPresent: Bool) -> Void) {
        let events = client.events
        let lost = self.lost
        Task {
            for await event in events {
                switch event {
                case .connected(let sessionPresent): target(sessionPresent)
                case .disconnected: lost.target.withLock { $0 }?()
                }
            }
        }
    }

    public func disconnections(_ target: @escaping @Sendable () -> Void) {
        lost.target.withLock { $0 = target }
    }

    /// The client configuration for `configuration`.
    public static func clientConfiguration(_ configuration: DaemonConfiguration) throws -> MQTTConfiguration {
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
        return mqtt
    }

    public func connect() async throws {
        do {
            try await client.connect()
        } catch {
            // Retrying cannot help with wrong settings or credentials.
            let fatal: [MQTTError.Code] = [.invalidConfiguration, .connectionRefused, .authentication]
            // 0x84 (MQTT 5) or 1 (3.1.1): the broker does not speak the protocol level asked for.
            if error.code == .connectionRefused, client.configuration.protocolVersion == .v5, error.reasonCode == 0x84 || error.reasonCode == 1 {
                throw FatalConnectError(error: MQTTError(
                    code: error.code, reasonCode: error.reasonCode,
                    message: error.message + "; the broker does not speak MQTT 5 (nats-server speaks 3.1.1 only): set mqtt.protocol: \"3.1.1\""))
            }
            if fatal.contains(error.code) { throw FatalConnectError(error: error) }
            // RabbitMQ before 3.13 cannot parse an MQTT 5 CONNECT and closes the connection
            // without a CONNACK: a lost connection, retried, with no word of the protocol. A drop
            // before the CONNACK has other causes too, so this stays a hint on the retried error.
            if error.code == .connectionLost, client.configuration.protocolVersion == .v5 {
                throw MQTTError(code: error.code, reasonCode: error.reasonCode, message: error.message
                    + " (before the broker's CONNACK: a broker that speaks only MQTT 3.1.1, such as RabbitMQ before 3.13, does this; then set mqtt.protocol: \"3.1.1\")")
            }
            throw error
        }
    }

    public func subscribe(_ filters: [String], qos: MQTTQoS) async throws {
        guard !filters.isEmpty else { return }
        try await client.subscribe(filters.map { ($0, qos) })
    }

    public func unsubscribe(_ filters: [String]) async throws {
        guard !filters.isEmpty else { return }
        try await client.unsubscribe(filters)
    }

    // The message goes over as it is: the engine adds an expiry only on MQTT 5
    // (``AmpelDaemon/settings(_:ruleSet:)``), and the client checks the topic and the expiry.

    public func publish(_ message: OutgoingMessage) async throws(MQTTError) {
        try await client.publish(message)
    }

    public func enqueue(_ message: OutgoingMessage) throws(MQTTError) {
        try client.enqueue(message)
    }

    public func enqueue(_ message: OutgoingMessage, acknowledged: @escaping @Sendable (MQTTError?) -> Void) throws(MQTTError) {
        try client.enqueue(message, acknowledged: acknowledged)
    }

    public var unanswered: Int { client.unanswered }

    public func waitForAnswers(atMost target: Int) async {
        await client.waitForAnswers(atMost: target)
    }

    public func pauseReading() {
        client.pauseReading()
    }

    public func resumeReading() {
        client.resumeReading()
    }

    public var brokerInUse: String? { client.connectedBroker?.description }
    public var failovers: Int { client.counters.failovers }

    public func shutdown(clean: Bool) async {
        if clean { await client.disconnect() } else { await client.abort() }
    }
}

/// A connection failure that retrying cannot fix (bad settings, refused credentials).
public struct FatalConnectError: Error, CustomStringConvertible {
    public let error: MQTTError
    public var description: String { "\(error)" }
}
