import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Testing

/// The test broker helper itself: other test targets rely on it.
@Suite("MosquittoBroker test helper", .timeLimit(.minutes(1)))
struct MosquittoBrokerTests {
    @Test func startsKillsAndRestartsOnTheSamePortWithPersistence() async throws {
        let broker = try await MosquittoBroker.start(.init(persistent: true))
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let port = broker.port
        let directory = broker.directory
        let firstPID = try brokerPIDs(directory: directory)
        #expect(firstPID.count == 1)

        // A retained message survives SIGKILL because the broker saves on every change.
        let client = try await broker.connectedClient("helper-1")
        try await client.publish(topic: "helper/retained", payload: bytes("kept"), qos: .atLeastOnce, retain: true)
        await client.disconnect()
        try await broker.waitUntilPersisted("kept")

        await broker.kill()
        #expect(try brokerPIDs(directory: directory).isEmpty)
        try await broker.restart()
        #expect(broker.port == port)
        let secondPID = try brokerPIDs(directory: directory)
        #expect(secondPID.count == 1 && secondPID != firstPID)

        let (reader, inbox) = try await broker.subscribedClient("helper-2", [("helper/#", .atLeastOnce)])
        #expect(try await inbox.wait(for: 1).map(text) == ["kept"])
        await reader.disconnect()

        broker.stop()
        try await withTimeout(.seconds(30), "broker process gone") {
            while try !brokerPIDs(directory: directory).isEmpty { await threadSleep(for: .milliseconds(20)) }
        }
    }

    /// Every run's output pipe hangs up when the broker is killed and the next run's pipe takes
    /// its place. With `FileHandle.readabilityHandler` on those pipes, this churn crashed the
    /// test process (SIGSEGV in libdispatch's `_dispatch_event_loop_drain`); see ChildProcess.
    @Test func survivesManyKillsAndRestartsInARow() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let runs = 30
        var pids: Set<Int32> = []
        for _ in 1..<runs {
            pids.formUnion(try brokerPIDs(directory: broker.directory))
            await broker.kill()
            #expect(try brokerPIDs(directory: broker.directory).isEmpty)
            try await broker.restart()
        }
        pids.formUnion(try brokerPIDs(directory: broker.directory))
        let brokers = pids
        #expect(brokers.count == runs, "a new broker process for every run")
        #expect(broker.log.filter { $0.contains("mosquitto version") && $0.contains(" running") }.count == runs)
        #expect(broker.log.filter { $0 == "[ampel] mosquitto exited" }.count == runs - 1)
        // Each killed broker's guard was killed with it (SIGKILL; it dies a moment later): only
        // the current broker's guard is left.
        try await withTimeout(.seconds(30), "guards of killed brokers gone") {
            while try guardPIDs(watching: brokers).count > 1 { await threadSleep(for: .milliseconds(20)) }
        }
        #expect(try guardPIDs(watching: brokers).count == 1)
        let client = try await broker.connectedClient("helper-churn")
        try await client.publish(topic: "helper/churn", payload: bytes("alive"), qos: .atLeastOnce)
        await client.disconnect()
    }

    @Test func releasedBrokerLeavesNoProcess() async throws {
        var directory = ""
        do {
            let broker = try await MosquittoBroker.start()
            directory = broker.directory
            #expect(try brokerPIDs(directory: directory).count == 1)
        }
        let released = directory
        try await withTimeout(.seconds(30), "broker process gone after deinit") {
            while try !brokerPIDs(directory: released).isEmpty { await threadSleep(for: .milliseconds(20)) }
        }
    }

    @Test func configHasTheThreeQoS1Settings() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }  // also keeps the broker alive to the end of the test
        let config = try String(contentsOfFile: broker.directory + "/mosquitto.conf", encoding: .utf8)
        #expect(config.contains("max_queued_messages 1000000"))
        #expect(config.contains("max_inflight_messages 0"))
        #expect(config.contains("set_tcp_nodelay true"))
        broker.stop()
    }
}

/// PIDs of live broker guard processes (`sh -c … ampel-broker-guard <pid>`) watching one of `brokers`.
func guardPIDs(watching brokers: Set<Int32>) throws -> [Int32] {
    try liveProcesses().filter { _, arguments in
        arguments.count >= 5 && arguments[3] == "ampel-broker-guard" && Int32(arguments[4]).map(brokers.contains) == true
    }.map(\.pid)
}

/// PIDs of live mosquitto processes started with the config file in `directory`.
func brokerPIDs(directory: String) throws -> [Int32] {
    try liveProcesses().filter { _, arguments in
        arguments.first?.hasSuffix("mosquitto") == true && arguments.count >= 3 && arguments[2] == directory + "/mosquitto.conf"
    }.map(\.pid)
}

/// Every process that is not a zombie (state Z: gone as far as ports and signals are concerned),
/// with its arguments.
func liveProcesses() throws -> [(pid: Int32, arguments: [String])] {
    var result: [(pid: Int32, arguments: [String])] = []
    for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc") {
        guard let pid = Int32(entry),
            let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
            let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8)
        else { continue }
        if stat.split(separator: " ").dropFirst(2).first == "Z" { continue }
        result.append((pid, cmdline.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }))
    }
    return result
}
