import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Testing

/// `enqueue`: publishing at the producer's pace, in order, with QoS 1 delivery left to libmosquitto.
@Suite("Enqueue without awaiting acknowledgements", .timeLimit(.minutes(1)))
struct MQTTEnqueueTests {
    @Test(arguments: [MQTTConfiguration.ProtocolVersion.v311, .v5])
    func enqueuedMessagesArriveAllAndInOrder(_ version: MQTTConfiguration.ProtocolVersion) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let (subscriber, inbox) = try await broker.subscribedClient("enq-sub", [("enq/#", .atLeastOnce)], version)
        let publisher = try await broker.connectedClient("enq-pub", version)
        let count = 2_000
        for index in 0..<count {
            try publisher.enqueue(topic: "enq/\(index % 7)", payload: bytes("m\(index)"), qos: .atLeastOnce)
        }
        // An awaited publish after them is acknowledged only after the broker took the earlier ones.
        try await publisher.publish(topic: "enq/last", payload: bytes("last"), qos: .atLeastOnce)
        let received = try await inbox.wait(for: count + 1)
        #expect(received.map(text) == (0..<count).map { "m\($0)" } + ["last"])
        #expect(publisher.counters.sent == count + 1)
        await publisher.disconnect()
        await subscriber.disconnect()
    }

    @Test func enqueuedBeforeConnectIsSentAfterIt() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let (subscriber, inbox) = try await broker.subscribedClient("enq-sub2", [("early/#", .atLeastOnce)])
        let publisher = MQTTClient(configuration: broker.configuration("enq-early", .v5))
        try publisher.enqueue(topic: "early/a", payload: bytes("1"), qos: .atLeastOnce)
        try publisher.enqueue(topic: "early/a", payload: bytes("2"), qos: .atLeastOnce)
        #expect(throws: MQTTError.self) { try publisher.enqueue(topic: "early/a", payload: bytes("q0"), qos: .atMostOnce) }
        #expect(throws: MQTTError.self) { try publisher.enqueue(topic: "bad/#", payload: bytes("x"), qos: .atLeastOnce) }
        try await publisher.connect()
        let received = try await inbox.wait(for: 2)
        #expect(received.map(text) == ["1", "2"])
        await publisher.disconnect()
        #expect(throws: MQTTError.self) { try publisher.enqueue(topic: "early/a", payload: bytes("3"), qos: .atLeastOnce) }
        await subscriber.disconnect()
    }

    @Test("unanswered counts what the broker has not acknowledged; waitForAnswers returns once it has")
    func unansweredAndWaitForAnswers() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let publisher = try await broker.connectedClient("enq-unanswered", .v5)
        #expect(publisher.unanswered == 0)
        broker.pause()
        let count = 300
        for index in 0..<count {
            try publisher.enqueue(topic: "unanswered/\(index % 3)", payload: bytes("m\(index)"), qos: .atLeastOnce)
        }
        // A frozen broker answers nothing: every QoS 1 publish is still the client's.
        #expect(publisher.unanswered == count)
        let drained = Task { await publisher.waitForAnswers(atMost: 10) }
        broker.resume()
        await drained.value
        #expect(publisher.unanswered <= 10)
        // Everything is answered in the end; a wait for what is already true returns at once.
        await publisher.waitForAnswers(atMost: 0)
        #expect(publisher.unanswered == 0)
        await publisher.disconnect()
    }

    @Test("publishes waiting offline for the connection count as unanswered, and are answered after the reconnect")
    func offlineCountsAsUnanswered() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let publisher = MQTTClient(configuration: broker.persistentConfiguration("enq-offline", .v5))
        try await publisher.connect()
        var events = publisher.events.makeAsyncIterator()
        _ = await events.next()  // connected
        await broker.kill()
        // The client has seen the loss: from now on its publishes wait offline.
        while let event = await events.next() {
            if case .disconnected = event { break }
        }
        for index in 0..<50 {
            try publisher.enqueue(topic: "offline/\(index)", payload: bytes("m\(index)"), qos: .atLeastOnce)
        }
        #expect(publisher.unanswered == 50, "a producer that waits on unanswered is held back by these too")
        try await broker.restart()
        await publisher.waitForAnswers(atMost: 0)
        #expect(publisher.unanswered == 0)
        await publisher.disconnect()
    }

    @Test("QoS 0 publishes leave unanswered alone: QoS 1 publishes after them all count")
    func qos0DoesNotHideQoS1() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let (subscriber, inbox) = try await broker.subscribedClient("enq-q0-sub", [("q0/#", .atMostOnce)])
        let publisher = try await broker.connectedClient("enq-q0", .v5)
        let count = 50
        for index in 0..<count {
            try await publisher.publish(topic: "q0/a", payload: bytes("m\(index)"), qos: .atMostOnce)
        }
        // Received, so written: libmosquitto has reported each of them done.
        _ = try await inbox.wait(for: count)
        broker.pause()
        for index in 0..<3 {
            try publisher.enqueue(topic: "q1/a", payload: bytes("n\(index)"), qos: .atLeastOnce)
        }
        #expect(publisher.unanswered == 3)
        broker.resume()
        await publisher.waitForAnswers(atMost: 0)
        #expect(publisher.unanswered == 0)
        await publisher.disconnect()
        await subscriber.disconnect()
    }
}
