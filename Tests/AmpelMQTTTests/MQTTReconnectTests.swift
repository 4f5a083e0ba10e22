import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Testing

/// The broker dies (SIGKILL) and comes back; the client must recover by itself.
@Suite("Reconnect and persistent sessions", .timeLimit(.minutes(2)))
struct MQTTReconnectTests {
    @Test(arguments: [MQTTConfiguration.ProtocolVersion.v311, .v5])
    func brokerKillAndRestartLosesNothing(_ version: MQTTConfiguration.ProtocolVersion) async throws {
        let broker = try await MosquittoBroker.start(.init(persistent: true))
        defer { broker.stop() }  // also keeps the broker alive to the end of the test

        // The subscriber keeps a persistent session and stays away for a while after the restart:
        // 6-12 s (the backoff's jitter takes up to half), time for the restart, the publisher's
        // 20 queued publishes and the peer's 15 round trips on a loaded machine (4 s, that is
        // 2-4 s, was a race against them).
        var subConfig = broker.persistentConfiguration("persist-sub", version, expiry: .seconds(3600))
        subConfig.reconnectMinDelay = .seconds(12)
        subConfig.reconnectMaxDelay = .seconds(12)
        let subscriber = MQTTClient(configuration: subConfig)
        let subEvents = EventCollector(subscriber)
        let inbox = MessageCollector(subscriber)
        try await subscriber.connect()
        try await subscriber.subscribe([("persist/#", .atLeastOnce)])
        try await broker.waitForLog("persist-sub 1 persist/#")

        let publisher = try await broker.connectedClient("persist-pub", version)
        let pubEvents = EventCollector(publisher)
        try await publisher.publish(topic: "persist/before", payload: bytes("before"), qos: .atLeastOnce)
        try await inbox.wait(for: 1)
        try await broker.waitUntilPersisted("persist/#")  // the session's subscription is on disk

        await broker.kill()
        try await pubEvents.wait("publisher lost connection") { disconnections($0) == 1 }
        try await subEvents.wait("subscriber lost connection") { disconnections($0) == 1 }

        // QoS 0 while disconnected is refused loudly (libmosquitto would drop it silently) ...
        await #expect(throws: MQTTError.self) {
            try await publisher.publish(topic: "persist/q0", payload: bytes("q0"), qos: .atMostOnce)
        }
        // ... while QoS 1 publishes are accepted and queued until the broker is back.
        let whileDown = 20
        let pending = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<whileDown {
                    group.addTask {
                        try await publisher.publish(topic: "persist/down/\(index)", payload: bytes("down-\(index)"), qos: .atLeastOnce)
                    }
                }
                try await group.waitForAll()
            }
        }

        try await broker.restart()
        try await pubEvents.wait("publisher reconnected") { connections($0) == 2 }
        try await withTimeout(.seconds(15), "queued QoS 1 publishes acknowledged") { try await pending.value }

        // Published by someone else while the subscriber is still away: only its persistent
        // session (which survived the SIGKILL on disk) can hold these.
        let peer = try await broker.connectedClient("persist-peer", version)
        let whileAway = 15
        for index in 0..<whileAway {
            try await peer.publish(topic: "persist/away/\(index)", payload: bytes("away-\(index)"), qos: .atLeastOnce)
        }
        #expect(connections(subEvents.events) == 1, "the subscriber was meant to be away still")

        try await subEvents.wait("subscriber reconnected") { connections($0) == 2 }
        #expect(subEvents.events.last == .connected(sessionPresent: true))
        let expected = 1 + whileDown + whileAway
        let received = try await inbox.wait(for: expected)
        let unique = Set(received.map(text))
        #expect(unique == Set(["before"] + (0..<whileDown).map { "down-\($0)" } + (0..<whileAway).map { "away-\($0)" }))
        #expect(unique.count == expected)
        #expect(subscriber.counters.reconnects == 1)
        #expect(publisher.counters.reconnects == 1)
        #expect(publisher.counters.acknowledged == 1 + whileDown)
        await peer.disconnect()
        await publisher.disconnect()
        await subscriber.disconnect()
    }

    @Test func resubscribesWhenTheSessionWasNotKept() async throws {
        // No persistence: after the restart the broker knows nothing about the subscription.
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let subscriber = MQTTClient(configuration: broker.configuration("resub-sub"))
        let events = EventCollector(subscriber)
        let inbox = MessageCollector(subscriber)
        try await subscriber.connect()
        try await subscriber.subscribe([("resub/a/#", .atLeastOnce), ("resub/b", .atMostOnce)])

        await broker.kill()
        try await broker.restart()
        try await events.wait("reconnected") { connections($0) == 2 }
        #expect(events.events.last == .connected(sessionPresent: false))
        // The broker logs each subscription it receives; wait for the restored ones.
        try await broker.waitForLog("resub-sub 1 resub/a/#")
        try await broker.waitForLog("resub-sub 0 resub/b")

        let publisher = try await broker.connectedClient("resub-pub")
        try await publisher.publish(topic: "resub/a/x", payload: bytes("a"), qos: .atLeastOnce)
        try await publisher.publish(topic: "resub/b", payload: bytes("b"), qos: .atLeastOnce)
        let received = try await inbox.wait(for: 2)
        #expect(received.map(text) == ["a", "b"])
        #expect(received.map(\.qos) == [.atLeastOnce, .atMostOnce])
        await publisher.disconnect()
        await subscriber.disconnect()
    }

    @Test func v5PersistentSessionSurvivesAClientRestart() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let config = broker.persistentConfiguration("session-client")
        try await leaveSession(config, subscribedTo: [("session/#", .atLeastOnce)])

        let publisher = try await broker.connectedClient("session-pub")
        for index in 0..<5 {
            try await publisher.publish(topic: "session/\(index)", payload: bytes("\(index)"), qos: .atLeastOnce)
        }
        let (second, inbox) = try await resumeSession(config)
        #expect(try await inbox.wait(for: 5).map(text) == ["0", "1", "2", "3", "4"])
        await second.disconnect()
        await publisher.disconnect()
    }
}
