import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Testing

/// Publish/subscribe through a real broker, for MQTT 3.1.1 and 5.
@Suite("Round trips through mosquitto", .timeLimit(.minutes(1)))
struct MQTTRoundTripTests {
    @Test(arguments: [MQTTConfiguration.ProtocolVersion.v311, .v5])
    func qos0AndQos1RoundTrip(_ version: MQTTConfiguration.ProtocolVersion) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let subscriber = try await broker.connectedClient("rt-sub", version)
        let publisher = try await broker.connectedClient("rt-pub", version)
        let inbox = MessageCollector(subscriber)
        let granted = try await subscriber.subscribe([("rt/q0/#", .atMostOnce), ("rt/q1/#", .atLeastOnce)])
        #expect(granted == [.atMostOnce, .atLeastOnce])

        // Payloads of different sizes (empty, binary, 100 kB) must arrive intact: the client
        // copies them out of libmosquitto's buffer inside the callback.
        let large = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let payloads: [[UInt8]] = [[], [0, 1, 2, 255], bytes("hello"), large] + (0..<46).map { bytes("m\($0)") }
        for payload in payloads {
            try await publisher.publish(topic: "rt/q0/a", payload: payload, qos: .atMostOnce)
        }
        for payload in payloads {
            try await publisher.publish(topic: "rt/q1/b", payload: payload, qos: .atLeastOnce)
        }
        let received = try await inbox.wait(for: 2 * payloads.count)
        let q0 = received.filter { $0.topic == "rt/q0/a" }
        let q1 = received.filter { $0.topic == "rt/q1/b" }
        #expect(q0.map(\.payload) == payloads)
        #expect(q1.map(\.payload) == payloads)
        #expect(q0.allSatisfy { $0.qos == .atMostOnce && !$0.retain })
        #expect(q1.allSatisfy { $0.qos == .atLeastOnce && !$0.retain })
        #expect(publisher.counters.sent == 2 * payloads.count)
        #expect(publisher.counters.acknowledged == payloads.count)
        #expect(subscriber.counters.received == 2 * payloads.count)
        #expect(subscriber.counters.droppedOnOverflow == 0)
        await publisher.disconnect()
        await subscriber.disconnect()
    }

    @Test func retainedMessageReachesALateSubscriber() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let publisher = try await broker.connectedClient("ret-pub")
        try await publisher.publish(topic: "ampel/status", payload: bytes("online"), qos: .atLeastOnce, retain: true)
        try await publisher.publish(topic: "ampel/other", payload: bytes("live"), qos: .atLeastOnce, retain: false)

        let (late, inbox) = try await broker.subscribedClient("ret-late", [("ampel/#", .atLeastOnce)], .v311)
        let first = try await inbox.wait(for: 1)
        #expect(first.map(\.topic) == ["ampel/status"])
        #expect(first.first?.retain == true)
        #expect(first.first.map(text) == "online")
        // A live (non-retained) publish after subscribing arrives with retain = false.
        try await publisher.publish(topic: "ampel/status", payload: bytes("still online"), qos: .atLeastOnce, retain: true)
        let second = try await inbox.wait(for: 2)
        #expect(second.last?.retain == false)
        await late.disconnect()
        await publisher.disconnect()
    }

    @Test func wildcardSubscriptionsDeliverOnlyMatchingTopics() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let (subscriber, inbox) = try await broker.subscribedClient("wild-sub", [("w/+/c", .atLeastOnce), ("x/#", .atLeastOnce)])
        let publisher = try await broker.connectedClient("wild-pub")
        let topics = ["w/b/c", "w/b/d", "w/c", "x", "x/y/z", "y/x", "w/b/c/d", "x/end"]
        for topic in topics {
            try await publisher.publish(topic: topic, payload: bytes(topic), qos: .atLeastOnce)
        }
        // One publisher, one QoS: the broker keeps the order, so "x/end" comes last.
        let received = try await inbox.wait(for: 4)
        #expect(received.map(\.topic) == ["w/b/c", "x", "x/y/z", "x/end"])
        let filters = try [MQTTTopicFilter("w/+/c"), MQTTTopicFilter("x/#")]
        #expect(topics.filter { topic in filters.contains { $0.matches(topic) } } == received.map(\.topic))
        await subscriber.disconnect()
        await publisher.disconnect()
    }

    @Test(arguments: [MQTTConfiguration.ProtocolVersion.v311, .v5])
    func sharedSubscriptionSplitsMessagesBetweenMembers(_ version: MQTTConfiguration.ProtocolVersion) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let memberA = try await broker.connectedClient("share-a", version)
        let memberB = try await broker.connectedClient("share-b", version)
        let inbox = MessageCollector(memberA, memberB)
        try await memberA.subscribe([("$share/ampel/jobs/#", .atLeastOnce)])
        try await memberB.subscribe([("$share/ampel/jobs/#", .atLeastOnce)])
        let publisher = try await broker.connectedClient("share-pub", version)
        let count = 100
        for index in 0..<count {
            try await publisher.publish(topic: "jobs/\(index % 3)", payload: bytes("\(index)"), qos: .atLeastOnce)
        }
        try await inbox.wait(for: count)
        let a = inbox.messages(from: 0)
        let b = inbox.messages(from: 1)
        #expect(a.count + b.count == count)
        #expect(!a.isEmpty && !b.isEmpty, "both members get a share (a: \(a.count), b: \(b.count))")
        #expect(Set((a + b).map(text)) == Set((0..<count).map { "\($0)" }))
        #expect(a.allSatisfy { $0.topic.hasPrefix("jobs/") })
        await publisher.disconnect()
        await memberA.disconnect()
        await memberB.disconnect()
    }

    @Test func messageExpiryDropsUndeliveredMessages() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let config = broker.persistentConfiguration("expiry-sub")
        try await leaveSession(config, subscribedTo: [("exp/#", .atLeastOnce)])

        let publisher = try await broker.connectedClient("expiry-pub")
        try await publisher.publish(topic: "exp/short", payload: bytes("short"), qos: .atLeastOnce, messageExpiry: .seconds(1))
        try await publisher.publish(topic: "exp/long", payload: bytes("long"), qos: .atLeastOnce, messageExpiry: .seconds(600))
        try await publisher.publish(topic: "exp/none", payload: bytes("none"), qos: .atLeastOnce)
        // Expiry is a property of elapsed time, so here the test has to let time pass.
        await threadSleep(for: .milliseconds(2200))

        let (second, inbox) = try await resumeSession(config)
        try await publisher.publish(topic: "exp/marker", payload: bytes("marker"), qos: .atLeastOnce)
        let received = try await inbox.wait(for: 3)
        #expect(received.map(\.topic) == ["exp/long", "exp/none", "exp/marker"])
        await second.disconnect()
        await publisher.disconnect()
    }
}
