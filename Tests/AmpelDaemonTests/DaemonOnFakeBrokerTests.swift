import AmpelMessages
@testable import AmpelDaemon
import AmpelDomain
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Logging
import Synchronization
import Testing

/// The daemon itself (`AmpelDaemon`: start, loop, executor, stop) without a broker: a fake
/// transport takes what it publishes and hands it what a broker that retains nothing would,
/// the messages on the topics it subscribed to. What a fix turns into and in which order is
/// then read off the fake, with the daemon's real journal under a temporary state directory.
@Suite("AmpelDaemon on a fake broker", .timeLimit(.minutes(1)))
struct DaemonOnFakeBrokerTests {
    final class FakeBroker: StubTransport {
        private struct State {
            var deliver: (@Sendable (MQTTMessage) -> Void)?
            var connected: (@Sendable (Bool) -> Void)?
            var filters: [MQTTTopicFilter] = []
        }
        private let state = Mutex(State())
        /// Every message the daemon handed over, in order.
        let published: AsyncStream<OutgoingMessage>
        private let publishing: AsyncStream<OutgoingMessage>.Continuation

        /// Input filters this broker refuses at SUBSCRIBE (its ACL), answering 0x87.
        let refusing: Set<String>

        init(refusing: Set<String> = []) {
            self.refusing = refusing
            (published, publishing) = AsyncStream.makeStream()
        }

        func subscribeAnswers(_ filters: [String]) async throws -> [MQTTSubscriptionAnswer] {
            try await subscribe(filters.filter { !refusing.contains($0) }, qos: .atLeastOnce)
            return filters.map { refusing.contains($0) ? .refused(reasonCode: 0x87) : .granted(.atLeastOnce) }
        }

        func deliver(to target: @escaping @Sendable (MQTTMessage) -> Void) {
            state.withLock { $0.deliver = target }
        }

        func connections(_ connected: @escaping @Sendable (Bool) -> Void, lost: @escaping @Sendable (String?) -> Void) {
            state.withLock { $0.connected = connected }
        }

        func connectToBroker() async throws {
            state.withLock { $0.connected }?(false)
        }

        func subscribe(_ filters: [String], qos: MQTTQoS) async throws {
            let parsed = try filters.map { filter throws(MQTTError) in try MQTTTopicFilter(filter) }
            state.withLock { $0.filters += parsed }
        }

        func unsubscribe(_ filters: [String]) async throws {
            state.withLock { $0.filters.removeAll { filters.contains($0.filter) } }
        }

        func publish(_ message: OutgoingMessage) async throws(MQTTError) {
            take(message)
        }

        /// Acknowledged after the call returns, as a broker's PUBACK comes: a caller registers
        /// what waits for it after handing the message over.
        func enqueue(_ message: OutgoingMessage, acknowledged: (@Sendable (MQTTError?) -> Void)?) {
            take(message)
            if let acknowledged { Task { acknowledged(nil) } }
        }

        /// Records `message` and, as a broker does, delivers it to its own subscriptions (the
        /// start's probes come back this way).
        private func take(_ message: OutgoingMessage) {
            publishing.yield(message)
            let deliver: (@Sendable (MQTTMessage) -> Void)? = state.withLock { state in
                state.filters.contains { $0.matches(message.topic) } ? state.deliver : nil
            }
            deliver?(MQTTMessage(topic: message.topic, payload: message.payload, qos: message.qos, retain: false))
        }

        /// A device's message, as the broker would hand it over.
        func send(_ topic: String, _ text: String) {
            let deliver = state.withLock { $0.deliver }
            deliver?(MQTTMessage(topic: topic, payload: Array(text.utf8), qos: .atLeastOnce, retain: false))
        }

        func finish() { publishing.finish() }
    }

    /// Reads `published` until `topic` comes with a payload that contains `text`, for up to
    /// 20 s; returns what came up to and with it.
    static func until(_ topic: String, containing text: String = "", from broker: FakeBroker,
                      in iterator: inout AsyncStream<OutgoingMessage>.Iterator) async throws -> [OutgoingMessage] {
        // Past the deadline the stream ends, and with it the wait.
        let deadline = Task {
            await threadSleep(for: .seconds(20))
            broker.finish()
        }
        defer { deadline.cancel() }
        var seen: [OutgoingMessage] = []
        while let message = await iterator.next() {
            seen.append(message)
            if message.topic == topic, text.isEmpty || message.text.contains(text) { return seen }
        }
        throw TimedOut(what: "\(topic) with '\(text)'; published: \(seen.map(\.topic))")
    }

    /// The daemon on `broker` with a fresh state directory in `directory`, with the tests' 100 ms tick.
    static func daemon(on broker: FakeBroker, directory: String) throws -> AmpelDaemon {
        var flags = ConfigurationOverrides(source: "snapshot", date: "2020-10-15")
        flags.broker = "mqtt://127.0.0.1:1"
        flags.stateDir = directory
        var configuration = try DaemonConfiguration.load(yaml: "", environment: [:], flags: flags)
        configuration.alerts.maxFixAge = nil
        let prepared = try DaemonRuntime.prepare(configuration)
        var logger = Logger(label: "ampel.test")
        logger.logLevel = .notice
        return try DaemonRuntime.makeDaemon(prepared, logger: logger, limits: DaemonLimits(tick: .milliseconds(100)), transport: broker)
    }

    @Test("a phone's fix in München: its alert, then its state, then a stop that says offline")
    func fixToAlertAndState() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let broker = FakeBroker()
        let daemon = try Self.daemon(on: broker, directory: directory)
        let running = Task { try await daemon.run() }
        // A test that fails half-way leaves no daemon behind (a second stop does nothing).
        defer { daemon.stop() }
        var iterator = broker.published.makeAsyncIterator()
        _ = try await Self.until("ampel/bridge/state", containing: BridgeState.online, from: broker, in: &iterator)

        broker.send("owntracks/alice/phone", #"{"_type":"location","lat":48.137,"lon":11.575,"tst":1602720000,"acc":10}"#)
        let handled = try await Self.until("ampel/device/alice/phone/state", from: broker, in: &iterator)
        let alert = try #require(handled.firstIndex { $0.topic == "ampel/device/alice/phone/alert" }, "no alert before the state")
        let alertJSON = try #require(try JSONSerialization.jsonObject(with: Data(handled[alert].payload)) as? [String: Any])
        #expect(alertJSON["to"] as? String == "red", "SK München was red on 2020-10-15: \(alertJSON)")
        #expect(handled[alert].qos == .exactlyOnce && !handled[alert].retain, "alerts with QoS 2 on MQTT 5")
        let state = handled[handled.count - 1]  // `until` ends with the state it waited for
        #expect(state.retain)
        #expect(state.text.contains(#""phase":"red""#), "\(state.text)")

        daemon.stop()
        let stopping = try await Self.until("ampel/bridge/state", containing: BridgeState.offline, from: broker, in: &iterator)
        #expect(stopping.last?.retain == true)
        try await running.value
        broker.finish()
    }

    @Test("an input filter the broker refuses makes the daemon degraded, naming it, and the others serve; with none granted it is not ready")
    func refusedInputFilters() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let broker = FakeBroker(refusing: ["owntracks/+/+"])
        let daemon = try Self.daemon(on: broker, directory: directory)
        let running = Task { try await daemon.run() }
        defer { daemon.stop() }
        var iterator = broker.published.makeAsyncIterator()
        _ = try await Self.until("ampel/bridge/state", containing: BridgeState.online, from: broker, in: &iterator)
        let refusals = await daemon.status.refusals
        #expect(refusals.problem() == nil)
        let degraded = try #require(refusals.degraded(now: 0))
        #expect(degraded.contains("owntracks/+/+") && !degraded.contains("ampel/location/+"), "\(degraded)")
        broker.send("ampel/location/bob", #"{"lat":48.137,"lon":11.575,"tst":1602720000}"#)
        _ = try await Self.until("ampel/device/bob/state", from: broker, in: &iterator)
        daemon.stop()
        try await running.value
        broker.finish()

        // Every input refused; Home Assistant's status topic, granted, is no input.
        let none = FakeBroker(refusing: ["owntracks/+/+", "ampel/location/+"])
        let secondDirectory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: secondDirectory) }
        let second = try Self.daemon(on: none, directory: secondDirectory)
        let secondRunning = Task { try await second.run() }
        defer { second.stop() }
        var secondIterator = none.published.makeAsyncIterator()
        _ = try await Self.until("ampel/bridge/state", containing: BridgeState.online, from: none, in: &secondIterator)
        let secondRefusals = await second.status.refusals
        let problem = try #require(secondRefusals.problem())
        #expect(problem.contains("owntracks/+/+") && problem.contains("ampel/location/+"), "\(problem)")
        second.stop()
        try await secondRunning.value
        none.finish()
    }
}
