import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Synchronization
import Testing

/// Connect, disconnect, errors, overflow, and the libmosquitto traps the design avoids.
@Suite("Lifecycle and libmosquitto traps", .timeLimit(.minutes(1)))
struct MQTTLifecycleTests {
    @Test func connectReturnsOnlyAfterConnack() async throws {
        // Trap: with mosquitto_connect_async the call returns before any CONNACK (and never
        // connects unless the loop thread already runs). Our connect() returns after CONNACK,
        // so a QoS 0 publish right after it must find a live connection.
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        for version in [MQTTConfiguration.ProtocolVersion.v311, .v5] {
            let client = MQTTClient(configuration: broker.configuration("connack-\(version)", version))
            let events = EventCollector(client)
            try await client.connect()
            try await client.publish(topic: "connack/check", payload: bytes("x"), qos: .atMostOnce)
            try await events.wait("connected event") { $0 == [.connected(sessionPresent: false)] }
            await client.disconnect()
        }
    }

    @Test func qos0WhileDisconnectedIsRefusedNotSilentlyDropped() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let client = MQTTClient(configuration: broker.configuration("q0-offline"))
        do {
            try await client.publish(topic: "q0/offline", payload: bytes("x"), qos: .atMostOnce)
            Issue.record("QoS 0 publish before connect() did not fail")
        } catch {
            #expect(error.code == .noConnection)
        }
        #expect(client.counters.sent == 0)
        await client.disconnect()
    }

    @Test func qos1PublishedBeforeTheFirstConnectIsSentAfterIt() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let (watcher, inbox) = try await broker.subscribedClient("early-watch", [("early/#", .atLeastOnce)])
        let client = MQTTClient(configuration: broker.configuration("early-pub"))
        let publish = Task { try await client.publish(topic: "early/q1", payload: bytes("queued"), qos: .atLeastOnce) }
        try await client.connect()
        try await withTimeout(.seconds(30), "queued publish acknowledged") { try await publish.value }
        #expect(try await inbox.wait(for: 1).map(text) == ["queued"])
        await client.disconnect()
        await watcher.disconnect()
    }

    @Test func connectErrorsAreTypedAndReadable() async throws {
        // Nothing listening on a fresh port.
        let port = try MosquittoBroker.freeLoopbackPort()
        do {
            try await MQTTClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: port, clientID: "nobody")).connect()
            Issue.record("connected to a closed port")
        } catch {
            #expect(error.code == .system)
            #expect(error.message.contains("127.0.0.1:\(port)"))
            #expect(error.message.lowercased().contains("refused"))
        }
        // A host that cannot be resolved.
        do {
            try await MQTTClient(configuration: MQTTConfiguration(host: "no-such-host.invalid", clientID: "nobody")).connect()
            Issue.record("resolved an .invalid host")
        } catch {
            #expect(error.code == .lookup, "\(error)")
            #expect(error.message.contains("no-such-host.invalid"))
        }
        // An MQTT 5 persistent session without expiry would silently end with the connection.
        var config = MQTTConfiguration(host: "127.0.0.1", port: port, clientID: "no-expiry")
        config.cleanStart = false
        do {
            try await MQTTClient(configuration: config).connect()
            Issue.record("accepted a v5 persistent session without session expiry")
        } catch {
            #expect(error.code == .invalidConfiguration)
            #expect(error.message.contains("sessionExpiry"))
        }
    }

    @Test func disconnectStopsTheThreadEndsTheStreamsAndClosesTheClient() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let client = try await broker.connectedClient("thr-stop")
        #expect(threadNames().contains("mqtt-thr-stop"))
        let events = EventCollector(client)
        let streamEnded = Task { for await _ in client.messages {} }

        await client.disconnect()
        try await withTimeout(.seconds(30), "messages stream ends") { await streamEnded.value }
        try await events.wait("disconnected event") { $0.last == .disconnected(reason: MQTTError(code: .success, message: "disconnected by the client")) }
        #expect(!threadNames().contains("mqtt-thr-stop"), "network thread still running")
        try await broker.waitForLog("Client thr-stop disconnected.")

        for qos in [MQTTQoS.atMostOnce, .atLeastOnce] {
            do {
                try await client.publish(topic: "closed", payload: [], qos: qos)
                Issue.record("publish after disconnect succeeded")
            } catch {
                #expect(error.code == .closed)
            }
        }
        await #expect(throws: MQTTError.self) { try await client.connect() }
        await client.disconnect()  // idempotent
    }

    @Test func releasingAClientWithoutDisconnectStopsItsThread() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        do {
            let client = try await broker.connectedClient("thr-drop")
            try await client.publish(topic: "drop", payload: [], qos: .atLeastOnce)
            #expect(threadNames().contains("mqtt-thr-drop"))
        }
        // deinit sends DISCONNECT and lets the thread finish on its own.
        try await broker.waitForLog("Client thr-drop disconnected.")
        try await withTimeout(.seconds(30), "thread gone") {
            while threadNames().contains("mqtt-thr-drop") { await threadSleep(for: .milliseconds(20)) }
        }
    }

    @Test(arguments: [MQTTConfiguration.OverflowPolicy.dropNewest, .dropOldest])
    func overflowDropsAndCounts(_ policy: MQTTConfiguration.OverflowPolicy) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        var config = broker.configuration("overflow-\(policy)")
        config.incomingBufferSize = 10
        config.overflowPolicy = policy
        let slow = MQTTClient(configuration: config)
        try await slow.connect()
        try await slow.subscribe([("flood/#", .atLeastOnce)])
        let publisher = try await broker.connectedClient("flood-pub")
        for index in 0..<50 {
            try await publisher.publish(topic: "flood/x", payload: bytes("\(index)"), qos: .atLeastOnce)
        }
        // Nobody reads yet; there is no event for "the network thread handed over message 50",
        // so poll the counter with a deadline.
        try await withTimeout(.seconds(30), "50 messages received") {
            while slow.counters.received < 50 { await threadSleep(for: .milliseconds(10)) }
        }
        #expect(slow.counters.droppedOnOverflow == 40)
        var iterator = slow.messages.makeAsyncIterator()
        var kept: [String] = []
        for _ in 0..<10 {
            if let message = await iterator.next() { kept.append(text(message)) }
        }
        let expected = policy == .dropNewest ? (0..<10).map { "\($0)" } : (40..<50).map { "\($0)" }
        #expect(kept == expected)
        await slow.disconnect()
        #expect(await iterator.next() == nil, "buffer held more than incomingBufferSize")
        await publisher.disconnect()
    }

    @Test func consumerCanPublishAndAwaitAcksWhileHandlingMessages() async throws {
        // If the network thread ever waited for the consumer (or a callback waited for the
        // network thread), an echo service that awaits its own PUBACKs would deadlock.
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let echo = try await broker.connectedClient("echo")
        try await echo.subscribe([("ping/#", .atLeastOnce)])
        let service = Task {
            for await message in echo.messages {
                try await echo.publish(topic: "pong/" + message.topic.dropFirst(5), payload: message.payload, qos: .atLeastOnce)
            }
        }
        let (caller, inbox) = try await broker.subscribedClient("caller", [("pong/#", .atLeastOnce)])
        for index in 0..<200 {
            try await caller.publish(topic: "ping/\(index)", payload: bytes("\(index)"), qos: .atLeastOnce)
        }
        let received = try await inbox.wait(for: 200)
        #expect(Set(received.map(text)) == Set((0..<200).map { "\($0)" }))
        await echo.disconnect()
        _ = await service.result
        await caller.disconnect()
    }

    @Test func manyClientsCreatedConcurrently() async throws {
        // mosquitto_lib_init runs once (Swift global initialiser) even when the first clients
        // are created on many threads at once.
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<12 {
                group.addTask {
                    let client = try await broker.connectedClient("many-\(index)", index.isMultiple(of: 2) ? .v5 : .v311)
                    try await client.publish(topic: "many/\(index)", payload: bytes("\(index)"), qos: .atLeastOnce)
                    await client.disconnect()
                }
            }
            try await group.waitForAll()
        }
        #expect(MQTTClient.libraryVersion.hasPrefix("2."))
    }

    @Test func cancellingAPublishStopsOnlyTheWait() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let client = MQTTClient(configuration: broker.configuration("cancel-pub"))
        // Not connected: the QoS 1 publish is queued and waits; cancel the wait.
        let waiting = Task { try await client.publish(topic: "cancel/x", payload: bytes("x"), qos: .atLeastOnce) }
        waiting.cancel()
        do {
            try await waiting.value
            Issue.record("cancelled publish reported success before any connection")
        } catch let error as MQTTError {
            #expect(error.code == .cancelled)
        }
        // The message itself is still delivered once connected.
        let (watcher, inbox) = try await broker.subscribedClient("cancel-watch", [("cancel/#", .atLeastOnce)])
        try await client.connect()
        #expect(try await inbox.wait(for: 1).map(text) == ["x"])
        await client.disconnect()
        await watcher.disconnect()
    }

    @Test func cancellingAPublishThatAwaitsItsAcknowledgementStopsOnlyThatWait() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let (watcher, inbox) = try await broker.subscribedClient("cancel-sent-watch", [("cancel/#", .atLeastOnce)])
        let client = try await broker.connectedClient("cancel-sent-pub")
        // A frozen broker reads nothing and answers nothing: both publishes are sent and wait
        // for their PUBACK; the first is cancelled (found by its token, not its message id).
        broker.pause()
        let cancelled = Task { try await client.publish(topic: "cancel/a", payload: bytes("a"), qos: .atLeastOnce) }
        let kept = Task { try await client.publish(topic: "cancel/b", payload: bytes("b"), qos: .atLeastOnce) }
        try await withTimeout(.seconds(30), "both publishes sent") {
            while client.counters.sent < 2 { await Task.yield() }
        }
        cancelled.cancel()
        do {
            try await withTimeout(.seconds(30), "cancelled publish returns") { try await cancelled.value }
            Issue.record("a publish the broker never acknowledged reported success")
        } catch let error as MQTTError {
            #expect(error.code == .cancelled)
        }
        broker.resume()
        // The other wait still gets its answer, and both messages are delivered.
        try await withTimeout(.seconds(30), "kept publish acknowledged") { try await kept.value }
        #expect(Set(try await inbox.wait(for: 2).map(text)) == ["a", "b"])
        #expect(client.counters.acknowledged == 1)
        await client.disconnect()
        await watcher.disconnect()
    }
}
