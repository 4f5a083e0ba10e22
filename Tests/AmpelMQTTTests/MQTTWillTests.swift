import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Testing

/// The Last Will, with a client process of ours that is killed or disconnects.
@Suite("Last Will", .timeLimit(.minutes(1)))
struct MQTTWillTests {
    @Test func willFiresWhenTheClientProcessIsKilled() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let (watcher, inbox) = try await broker.subscribedClient("will-watch", [("ampel/will/#", .atLeastOnce)])

        let probe = try ProbeProcess(arguments: ["\(broker.port)", "probe-killed", "ampel/will/killed", "gone", "hold"])
        try await probe.waitForLine("connected")
        try await broker.waitForLog("probe-killed")
        probe.killHard()

        let received = try await inbox.wait(for: 1)
        #expect(received.first?.topic == "ampel/will/killed")
        #expect(received.first.map(text) == "gone")
        await watcher.disconnect()
    }

    @Test func willDoesNotFireOnCleanDisconnect() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let (watcher, inbox) = try await broker.subscribedClient("will-watch2", [("ampel/will/#", .atLeastOnce)])

        let probe = try ProbeProcess(arguments: ["\(broker.port)", "probe-clean", "ampel/will/clean", "gone", "disconnect"])
        try await probe.waitForLine("disconnected")
        // mosquitto logs this only for a client that sent DISCONNECT.
        try await broker.waitForLog("Client probe-clean disconnected.")
        // Any Will would have been published before the broker handled anything after the
        // disconnect, so the marker published now must be the first message.
        let publisher = try await broker.connectedClient("will-marker")
        try await publisher.publish(topic: "ampel/will/clean", payload: bytes("marker"), qos: .atLeastOnce)
        let received = try await inbox.wait(for: 1)
        #expect(received.map(text) == ["marker"])
        await publisher.disconnect()
        await watcher.disconnect()
    }

    @Test func cleanDisconnectLeavesNoRetainedWill() async throws {
        // The in-process variant of the clean case, with a retained Will: had the broker
        // published it, a new subscriber would get it before the marker.
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        var config = broker.configuration("will-inproc")
        config.will = MQTTWill(topic: "ampel/will/inproc", payload: bytes("offline"), qos: .atLeastOnce, retain: true)
        let client = MQTTClient(configuration: config)
        try await client.connect()
        await client.disconnect()
        // A retained Will would show up for a new subscriber; the clean disconnect left none.
        let (checker, inbox) = try await broker.subscribedClient("will-check", [("ampel/will/#", .atLeastOnce)])
        try await checker.publish(topic: "ampel/will/marker", payload: bytes("m"), qos: .atLeastOnce)
        #expect(try await inbox.wait(for: 1).map(\.topic) == ["ampel/will/marker"])
        await checker.disconnect()
    }

    /// `abort()` drops the connection without DISCONNECT: the broker publishes the Will. With
    /// the broker frozen (SIGSTOP) while the client leaves, the Will comes once it runs again,
    /// where a DISCONNECT queued in its socket would have cancelled it.
    @Test(arguments: [false, true])
    func abortLeavesTheWillToTheBroker(_ brokerFrozen: Bool) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let (watcher, inbox) = try await broker.subscribedClient("will-watch", [("ampel/will/#", .atLeastOnce)])
        var config = broker.configuration("will-abort")
        config.will = MQTTWill(topic: "ampel/will/abort", payload: bytes("offline"), qos: .atLeastOnce, retain: true)
        let client = MQTTClient(configuration: config)
        try await client.connect()
        if brokerFrozen { broker.pause() }
        try await withTimeout(.seconds(30), "abort") { await client.abort() }
        if brokerFrozen { broker.resume() }
        let will = try await inbox.wait(for: 1)
        #expect(will.map(\.topic) == ["ampel/will/abort"])
        #expect(will.map(text) == ["offline"])
        #expect(client.counters.reconnects == 0)
        await watcher.disconnect()
    }
}
