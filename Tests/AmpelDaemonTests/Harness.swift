import AmpelMessages
@testable import AmpelDaemon
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Logging
import Synchronization
import Testing

struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// A test client that records every message of its subscriptions and awaits the ones a test
/// expects, with a deadline: an event is awaited, never a fixed time.
final class Recorder: Sendable {
    let client: MQTTClient
    private struct Waiter {
        let from: Int
        let predicate: @Sendable (MQTTMessage) -> Bool
        let continuation: CheckedContinuation<MQTTMessage, any Error>
    }
    private struct State {
        var messages: [MQTTMessage] = []
        var waiters: [UUID: Waiter] = [:]
    }
    private final class Box: Sendable {
        let mutex = Mutex(State())
    }
    private let box: Box
    private let pump: Task<Void, Never>

    private init(client: MQTTClient) {
        self.client = client
        let box = Box()
        self.box = box
        let messages = client.messages
        pump = Task {
            for await message in messages {
                let ready: [(CheckedContinuation<MQTTMessage, any Error>, MQTTMessage)] = box.mutex.withLock { s in
                    s.messages.append(message)
                    let index = s.messages.count - 1
                    var ready: [(CheckedContinuation<MQTTMessage, any Error>, MQTTMessage)] = []
                    for (id, waiter) in s.waiters where index >= waiter.from && waiter.predicate(message) {
                        ready.append((waiter.continuation, message))
                        s.waiters[id] = nil
                    }
                    return ready
                }
                for (continuation, message) in ready { continuation.resume(returning: message) }
            }
        }
    }

    static func start(_ broker: MosquittoBroker, filters: [String] = ["ampel/#", "wled/#", "cmnd/#", "homeassistant/#"]) async throws -> Recorder {
        let client = MQTTClient(configuration: MQTTConfiguration(host: broker.host, port: broker.port, clientID: "recorder-\(UUID().uuidString.prefix(8))"))
        try await client.connect()
        let recorder = Recorder(client: client)
        try await client.subscribe(filters.map { ($0, MQTTQoS.atLeastOnce) })
        return recorder
    }

    /// How many messages have arrived: a mark to look only at later ones.
    var mark: Int { box.mutex.withLock { $0.messages.count } }

    func messages(since mark: Int = 0) -> [MQTTMessage] { box.mutex.withLock { Array($0.messages[min(mark, $0.messages.count)...]) } }

    func messages(on topic: String, since mark: Int = 0) -> [MQTTMessage] { messages(since: mark).filter { $0.topic == topic } }

    /// The first message at or after `mark` that matches, waiting up to `timeout` for it.
    @discardableResult
    func first(_ what: String, since mark: Int = 0, timeout: Duration = .seconds(20),
               where predicate: @escaping @Sendable (MQTTMessage) -> Bool) async throws -> MQTTMessage {
        let id = UUID()
        let timer = Task {
            await threadSleep(for: timeout)
            let waiter = box.mutex.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.continuation.resume(throwing: TimedOut(what: what))
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let found: MQTTMessage? = box.mutex.withLock { s in
                if mark < s.messages.count, let hit = s.messages[mark...].first(where: predicate) { return hit }
                s.waiters[id] = Waiter(from: mark, predicate: predicate, continuation: continuation)
                return nil
            }
            if let found { continuation.resume(returning: found) }
        }
    }

    /// The first message on `topic` (at or after `mark`) whose JSON satisfies `predicate`.
    @discardableResult
    func json(_ topic: String, since mark: Int = 0, timeout: Duration = .seconds(20),
              where predicate: @escaping @Sendable ([String: Any]) -> Bool = { _ in true }) async throws -> [String: Any] {
        let message = try await first(topic, since: mark, timeout: timeout) { message in
            guard message.topic == topic, let object = Self.object(message) else { return false }
            return predicate(object)
        }
        return Self.object(message) ?? [:]
    }

    func text(_ topic: String, since mark: Int = 0, equals expected: String, timeout: Duration = .seconds(20)) async throws {
        try await first("\(topic) = \(expected)", since: mark, timeout: timeout) {
            $0.topic == topic && String(decoding: $0.payload, as: UTF8.self) == expected
        }
    }

    static func object(_ message: MQTTMessage) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any]
    }

    func close() async {
        await client.disconnect()
        pump.cancel()
    }
}

/// A publisher of locations (QoS 1).
struct Devices {
    let client: MQTTClient

    static func connect(_ broker: MosquittoBroker) async throws -> Devices {
        let client = MQTTClient(configuration: MQTTConfiguration(host: broker.host, port: broker.port, clientID: "devices-\(UUID().uuidString.prefix(8))"))
        try await client.connect()
        return Devices(client: client)
    }

    func send(_ topic: String, _ text: String) async throws {
        try await client.publish(topic: topic, payload: Array(text.utf8), qos: .atLeastOnce)
    }

    func owntracks(_ key: String, _ lat: Double, _ lon: Double, tst: Int) async throws {
        try await send("owntracks/\(key)", #"{"_type":"location","lat":\#(lat),"lon":\#(lon),"tst":\#(tst),"tid":"T"}"#)
    }

    func plain(_ id: String, _ lat: Double, _ lon: Double, tst: Int? = nil, lang: String? = nil) async throws {
        var fields = [#""lat":\#(lat)"#, #""lon":\#(lon)"#]
        if let tst { fields.append(#""tst":\#(tst)"#) }
        if let lang { fields.append(#""lang":"\#(lang)""#) }
        try await send("ampel/location/\(id)", "{" + fields.joined(separator: ",") + "}")
    }

    func close() async { await client.disconnect() }
}

/// Places whose district the bundled geometry knows.
enum Places {
    static let muenchen = (48.1374, 11.5755)      // 09162 SK München
    static let altoetting = (48.2264, 12.6770)    // 09171 LK Altötting
    static let unterhaching = (48.0658, 11.6156)  // 09184 LK München
    static let stuttgart = (48.7758, 9.1829)      // 08111 SK Stuttgart
    static let paris = (48.8566, 2.3522)          // no German district
}

/// The daemon running in this process against a real broker (the tests' in-process way in;
/// the built binary is the CLI tests' ``DaemonProcess``).
struct InProcessDaemon {
    let daemon: AmpelDaemon
    let task: Task<Void, any Error>

    /// Starts the daemon as `ampel run` would, with a 100 ms tick.
    /// - Parameters:
    ///   - limitsFixAge: keeps `alerts.max_fix_age`; off by default, because the tests' fixes
    ///     carry fixed timestamps (`tst` 10, 100, 1602750000) decades behind the clock.
    ///   - recorder: when given, returns once the daemon is online and has published its first info.
    ///   - beforeStart: runs after the configuration and the state are read, before the daemon is made.
    static func start(broker: MosquittoBroker, stateDirectory: String, yaml: String = "", flags: ConfigurationOverrides = .init(),
                      logger: Logger? = nil, limitsFixAge: Bool = false, awaiting recorder: Recorder? = nil,
                      beforeStart: () throws -> Void = {}) async throws -> InProcessDaemon {
        var flags = flags
        flags.broker = flags.broker ?? broker.url
        flags.stateDir = stateDirectory
        var configuration = try DaemonConfiguration.load(yaml: yaml, environment: [:], flags: flags)
        if !limitsFixAge { configuration.alerts.maxFixAge = nil }
        let prepared = try DaemonRuntime.prepare(configuration)
        try beforeStart()
        var logger = logger ?? Logger(label: "ampel.test")
        if logger.logLevel < .notice { logger.logLevel = .notice }
        let mark = recorder?.mark
        let daemon = try DaemonRuntime.makeDaemon(prepared, logger: logger, limits: DaemonLimits(tick: .milliseconds(100)))
        let running = InProcessDaemon(daemon: daemon, task: Task { try await daemon.run() })
        if let recorder, let mark {
            try await recorder.first("bridge online", since: mark) {
                $0.topic == "ampel/bridge/state" && !$0.retain && String(decoding: $0.payload, as: UTF8.self) == BridgeState.online
            }
            try await recorder.json("ampel/bridge/info", since: mark)
        }
        return running
    }

    /// Asks the daemon to stop as SIGTERM would, without waiting: for `defer`, so that a test
    /// that fails half-way leaves no daemon running behind it. A second stop does nothing.
    func requestStop() {
        daemon.stop()
    }

    /// Stops as SIGTERM would, and waits until it has published offline and disconnected.
    func stop() async throws {
        daemon.stop()
        try await task.value
    }
}

func temporaryDirectory() -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-daemon-\(UUID().uuidString)").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

extension Dictionary where Key == String, Value == Any {
    subscript(path path: String...) -> Any? {
        var current: Any? = self
        for key in path { current = (current as? [String: Any])?[key] }
        return current
    }
}

/// A log handler whose lines a test can await, like messages.
struct LogCapture: LogHandler {
    let lines: AsyncStream<String>.Continuation
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.yield("\(event.level) \(event.message)")
    }

    /// A logger, and the stream of its lines.
    static func make() -> (Logger, AsyncStream<String>) {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        return (Logger(label: "ampel.test") { _ in LogCapture(lines: continuation) }, stream)
    }
}
