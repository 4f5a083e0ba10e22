import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Synchronization

/// A consumer of `client.messages` (of one or more clients) that collects everything it
/// receives, so a test can await "n messages have arrived" several times.
final class MessageCollector: Sendable {
    private struct State {
        var messages: [(source: Int, message: MQTTMessage)] = []
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())
    private let tasks: Mutex<[Task<Void, Never>]> = Mutex([])

    init(_ clients: MQTTClient...) {
        for (source, client) in clients.enumerated() {
            let stream = client.messages
            let task = Task { [weak self] in
                for await message in stream {
                    self?.append(source, message)
                }
            }
            tasks.withLock { $0.append(task) }
        }
    }

    deinit {
        tasks.withLock { $0.forEach { $0.cancel() } }
    }

    private func append(_ source: Int, _ message: MQTTMessage) {
        let ready: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.messages.append((source, message))
            let count = state.messages.count
            let ready = state.waiters.filter { $0.count <= count }.map(\.continuation)
            state.waiters.removeAll { $0.count <= count }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// All messages so far, in arrival order.
    var messages: [MQTTMessage] { state.withLock { $0.messages.map(\.message) } }

    /// The messages received by the `source`-th client given to `init`.
    func messages(from source: Int) -> [MQTTMessage] {
        state.withLock { $0.messages.filter { $0.source == source }.map(\.message) }
    }

    /// Waits until at least `count` messages arrived in total, then returns all of them.
    @discardableResult
    func wait(for count: Int, timeout: Duration = .seconds(15)) async throws -> [MQTTMessage] {
        try await withTimeout(timeout, "\(count) messages (have \(messages.count))") { [self] in
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done: Bool = state.withLock { state in
                    if state.messages.count >= count { return true }
                    state.waiters.append((count, continuation))
                    return false
                }
                if done { continuation.resume() }
            }
            return messages
        }
    }
}

/// Collects connection events the same way.
final class EventCollector: Sendable {
    private struct State {
        var events: [MQTTConnectionEvent] = []
        var waiters: [(predicate: @Sendable ([MQTTConnectionEvent]) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    init(_ client: MQTTClient) {
        let stream = client.events
        Task { [weak self] in
            for await event in stream { self?.append(event) }
        }
    }

    private func append(_ event: MQTTConnectionEvent) {
        let ready: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.events.append(event)
            let events = state.events
            let ready = state.waiters.filter { $0.predicate(events) }.map(\.continuation)
            state.waiters.removeAll { $0.predicate(events) }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    var events: [MQTTConnectionEvent] { state.withLock { $0.events } }

    /// Waits until the events so far satisfy `predicate`.
    func wait(
        timeout: Duration = .seconds(15), _ what: String, until predicate: @escaping @Sendable ([MQTTConnectionEvent]) -> Bool
    ) async throws {
        try await withTimeout(timeout, "\(what) (events: \(events))") { [self] in
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done: Bool = state.withLock { state in
                    if predicate(state.events) { return true }
                    state.waiters.append((predicate, continuation))
                    return false
                }
                if done { continuation.resume() }
            }
        }
    }
}

extension MQTTConnectionEvent {
    var isConnected: Bool { if case .connected = self { true } else { false } }
    var isDisconnected: Bool { if case .disconnected = self { true } else { false } }
}

func connections(_ events: [MQTTConnectionEvent]) -> Int { events.filter(\.isConnected).count }
func disconnections(_ events: [MQTTConnectionEvent]) -> Int { events.filter(\.isDisconnected).count }

extension MosquittoBroker {
    func configuration(_ clientID: String, _ version: MQTTConfiguration.ProtocolVersion = .v5) -> MQTTConfiguration {
        var configuration = MQTTConfiguration(host: host, port: port, clientID: clientID)
        configuration.protocolVersion = version
        configuration.reconnectMinDelay = .milliseconds(50)
        configuration.reconnectMaxDelay = .milliseconds(400)
        return configuration
    }

    /// A connected client of ours.
    func connectedClient(_ clientID: String, _ version: MQTTConfiguration.ProtocolVersion = .v5) async throws -> MQTTClient {
        let client = MQTTClient(configuration: configuration(clientID, version))
        try await client.connect()
        return client
    }

    /// A connected client subscribed to `filters`, whose messages are collected from before the
    /// subscription, so none that the broker sends it is missed.
    func subscribedClient(
        _ clientID: String, _ filters: [(String, MQTTQoS)], _ version: MQTTConfiguration.ProtocolVersion = .v5
    ) async throws -> (client: MQTTClient, inbox: MessageCollector) {
        let client = try await connectedClient(clientID, version)
        let inbox = MessageCollector(client)
        try await client.subscribe(filters)
        return (client, inbox)
    }

    /// A configuration whose session outlives the connection (no clean start; `expiry` for MQTT 5).
    func persistentConfiguration(
        _ clientID: String, _ version: MQTTConfiguration.ProtocolVersion = .v5, expiry: Duration = .seconds(600)
    ) -> MQTTConfiguration {
        var configuration = configuration(clientID, version)
        configuration.cleanStart = false
        configuration.sessionExpiry = expiry
        return configuration
    }
}

/// Starts `configuration`'s persistent session: connects (the broker must report a new
/// session), subscribes to `filters` and disconnects, so the broker queues what matches for it.
func leaveSession(_ configuration: MQTTConfiguration, subscribedTo filters: [(String, MQTTQoS)]) async throws {
    let client = MQTTClient(configuration: configuration)
    let events = EventCollector(client)
    try await client.connect()
    try await client.subscribe(filters)
    try await events.wait("\(configuration.clientID) starts a new session") { $0.first == .connected(sessionPresent: false) }
    await client.disconnect()
}

/// A new client on `configuration`'s persistent session, returned once the broker reported
/// the session as present, with its messages collected from the start.
func resumeSession(_ configuration: MQTTConfiguration) async throws -> (client: MQTTClient, inbox: MessageCollector) {
    let client = MQTTClient(configuration: configuration)
    let events = EventCollector(client)
    let inbox = MessageCollector(client)
    try await client.connect()
    try await events.wait("\(configuration.clientID) resumes its session") { $0.first == .connected(sessionPresent: true) }
    return (client, inbox)
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
func text(_ message: MQTTMessage) -> String { String(decoding: message.payload, as: UTF8.self) }

/// This process's threads (Linux: /proc/self/task/<tid>), each with its name (`comm`, 15
/// characters at most).
func threads() -> [(tid: String, name: String)] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))
            .map { (task, $0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }
}

/// Names of this process's threads.
func threadNames() -> [String] { threads().map(\.name) }

/// The name of the calling thread (`comm`).
func currentThreadName() -> String {
    ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?")
        .trimmingCharacters(in: .whitespacesAndNewlines)
}
