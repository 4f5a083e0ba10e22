import AmpelMessages
@testable import AmpelDaemon
import AmpelMQTT
import AmpelTestSupport
import Logging
import Testing

/// The client, as the daemon's transport, hands messages from its network thread to the
/// daemon's queue (`deliver(to:)`). A target closure kept directly in a `Mutex` is wrapped in two more re-abstraction thunks on every
/// message, so delivery gets slower with each message and overflows the stack after some 10^5
/// messages. This pushes enough messages through to overflow it; the cost per message is
/// measured where timing belongs, in Benchmarks/mqtt and Benchmarks/daemon.
@Suite("MQTT client as the daemon's transport", .timeLimit(.minutes(2)))
struct MQTTClientDeliveryTests {
    @Test("50,000 messages reach the daemon's queue in order, none lost, without the thunks that overflowed the stack")
    func manyMessagesInOrder() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        var configuration = MQTTConfiguration(host: broker.host, port: broker.port, clientID: "transport-test")
        configuration.receiveMaximum = 1000
        let transport = MQTTClient(configuration: configuration, logger: Logger(label: "test"))
        let (stream, continuation) = AsyncStream<MQTTMessage>.makeStream()
        transport.deliver { continuation.yield($0) }
        try await transport.connectToBroker()
        try await transport.subscribe(["t/#"])

        let publisher = MQTTClient(configuration: MQTTConfiguration(host: broker.host, port: broker.port, clientID: "transport-pub"))
        try await publisher.connect()
        let count = 50_000
        let sender = Task {
            for index in 0..<count {
                try publisher.enqueue(topic: "t/\(index % 7)", payload: Array("\(index)".utf8), qos: .atLeastOnce)
                if index % 1000 == 999 { try await publisher.publish(topic: "t/sync", payload: [], qos: .atLeastOnce) }
            }
        }
        var received = 0
        var inOrder = true
        for await message in stream where message.topic != "t/sync" {
            if String(decoding: message.payload, as: UTF8.self) != "\(received)" { inOrder = false }
            received += 1
            if received == count { break }
        }
        try await sender.value
        #expect(received == count)
        #expect(inOrder)
        await publisher.disconnect()
        await transport.shutdown(clean: true)
    }
}
