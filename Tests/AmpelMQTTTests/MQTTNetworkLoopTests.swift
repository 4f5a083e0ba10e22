import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Testing

@testable import AmpelMQTT

/// The network thread sleeps in `poll` (up to a second) when there is nothing to do; packets
/// queued by other threads must wake it at once rather than wait for that timeout.
@Suite("Network thread wake-ups", .timeLimit(.minutes(1)))
struct MQTTNetworkLoopTests {
    /// Waits until the client's network thread has gone to sleep in `poll`.
    private func networkThreadAsleep(_ client: MQTTClient) async throws {
        try await withTimeout(.seconds(30), "network thread asleep") {
            while !client.session.loop.idle.load(ordering: .sequentiallyConsistent) { await Task.yield() }
        }
    }

    @Test(arguments: [MQTTConfiguration.ProtocolVersion.v311, .v5])
    func packetsQueuedWhileTheNetworkThreadSleepsGoOutAtOnce(_ version: MQTTConfiguration.ProtocolVersion) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let subscriber = try await broker.connectedClient("wake-sub", version)
        let publisher = try await broker.connectedClient("wake-pub", version)
        let inbox = MessageCollector(subscriber)
        let clock = ContinuousClock()
        // Each step starts with both network threads asleep; without a wake-up it would take
        // until their poll timeout (1 s) to write the packet. The fastest step of each path that
        // wakes the thread (requests, QoS 1, QoS 0, enqueue), not the slowest of all: on a loaded
        // machine one step may stall for other reasons, while a path without its wake-up waits
        // for the timeout every time.
        var steps: [(path: String, took: Duration)] = []
        func step(_ path: String, _ body: () async throws -> Void) async throws {
            try await networkThreadAsleep(subscriber)
            try await networkThreadAsleep(publisher)
            let start = clock.now
            try await body()
            steps.append((path, clock.now - start))
        }
        try await step("request") { try await subscriber.subscribe("wake/#", qos: .atLeastOnce) }
        for round in 0..<5 {
            try await step("qos1") { try await publisher.publish(topic: "wake/q1", payload: bytes("a\(round)"), qos: .atLeastOnce) }
            try await step("qos0") {
                try await publisher.publish(topic: "wake/q0", payload: bytes("b\(round)"), qos: .atMostOnce)
                try await inbox.wait(for: 3 * round + 2)
            }
            try await step("enqueue") {
                try publisher.enqueue(topic: "wake/e", payload: bytes("c\(round)"), qos: .atLeastOnce)
                try await inbox.wait(for: 3 * round + 3)
            }
        }
        try await step("request") { try await subscriber.unsubscribe(["wake/#"]) }
        #expect(inbox.messages.count == 15)
        for path in Set(steps.map(\.path)) {
            let fastest = steps.filter { $0.path == path }.map(\.took).min() ?? .zero
            #expect(fastest < .milliseconds(500), "\(path): packets waited for the network thread's poll timeout: \(steps)")
        }
        await publisher.disconnect()
        await subscriber.disconnect()
    }

    /// The loop's keep-alive step (`mosquitto_loop_misc`): an idle client pings on time and the
    /// broker keeps it (it drops a client silent for 1.5 keep-alive periods).
    @Test func anIdleClientKeepsItsConnectionWithPings() async throws {
        let broker = try await MosquittoBroker.start(.init(verboseLog: true))
        defer { broker.stop() }
        var configuration = broker.configuration("ka-idle")
        configuration.keepAlive = .seconds(5)
        let client = MQTTClient(configuration: configuration)
        let events = EventCollector(client)
        try await client.connect()
        // Two pings of an otherwise silent client: 10 s, well past the broker's 7.5 s limit.
        try await broker.waitForLog("Received PINGREQ from ka-idle", count: 2, timeout: .seconds(20))
        try await client.publish(topic: "ka/still-here", payload: bytes("x"), qos: .atLeastOnce)
        #expect(disconnections(events.events) == 0)
        #expect(client.counters.reconnects == 0)
        #expect(!broker.log.contains { $0.contains("exceeded timeout") })
        await client.disconnect()
    }
}

/// The scheduling class of the network thread (SCHED_BATCH by default, SCHED_OTHER on request).
@Suite("Network thread scheduling", .timeLimit(.minutes(1)))
struct MQTTNetworkThreadPolicyTests {
    /// Linux scheduling policy (field 41 of /proc/self/task/<tid>/stat) of the thread named `name`.
    private func policy(ofThreadNamed name: String) -> Int? {
        guard let tid = threads().first(where: { $0.name == name })?.tid,
            let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after "pid (comm)" start with field 3 (state); the policy is field 41.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 38 ? Int(fields[38]) : nil
    }

    @Test(arguments: [(MQTTConfiguration.NetworkThreadPolicy.batch, 3), (.normal, 0)])
    func networkThreadRunsInTheConfiguredClass(_ setting: MQTTConfiguration.NetworkThreadPolicy, _ expected: Int) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let id = setting == .batch ? "pol-batch" : "pol-normal"
        var configuration = broker.configuration(id)
        configuration.networkThreadPolicy = setting
        let client = MQTTClient(configuration: configuration)
        try await client.connect()
        #expect(policy(ofThreadNamed: "mqtt-\(id)") == expected)  // 3 = SCHED_BATCH, 0 = SCHED_OTHER
        await client.disconnect()
    }
}
