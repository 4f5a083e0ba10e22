import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Synchronization
import Testing

/// A client made with a message handler hands every message to it, in order, and none to
/// `messages` (the daemon's intake: one hand-off from the network thread to its own queue).
@Suite("Message handler", .timeLimit(.minutes(1)))
struct MQTTHandlerTests {
    @Test(arguments: [MQTTConfiguration.ProtocolVersion.v311, .v5])
    func handlerGetsEveryMessageInOrder(_ version: MQTTConfiguration.ProtocolVersion) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let (stream, continuation) = AsyncStream<MQTTMessage>.makeStream()
        let subscriber = MQTTClient(configuration: broker.configuration("handler-sub", version)) { message in
            continuation.yield(message)
        }
        try await subscriber.connect()
        try await subscriber.subscribe([("h/#", .atLeastOnce)])
        let publisher = try await broker.connectedClient("handler-pub", version)
        let payloads = (0..<500).map { bytes("fix \($0)") }
        for payload in payloads {
            try publisher.enqueue(topic: "h/dev", payload: payload, qos: .atLeastOnce)
        }
        var received: [MQTTMessage] = []
        for await message in stream {
            received.append(message)
            if received.count == payloads.count { break }
        }
        #expect(received.map(\.payload) == payloads)
        #expect(received.allSatisfy { $0.topic == "h/dev" && $0.qos == .atLeastOnce })
        #expect(subscriber.counters.received == payloads.count)

        // Nothing went to `messages`: it ends empty on disconnect.
        await subscriber.disconnect()
        var leftovers = 0
        for await _ in subscriber.messages { leftovers += 1 }
        #expect(leftovers == 0)
        await publisher.disconnect()
    }
}
