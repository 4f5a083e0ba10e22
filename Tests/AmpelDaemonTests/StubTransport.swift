import AmpelMessages
@testable import AmpelDaemon
import AmpelMQTT

/// A `DaemonTransport` whose every call does nothing: a test's fake conforms to this and writes
/// only the calls its test watches.
protocol StubTransport: DaemonTransport {}

extension StubTransport {
    func deliver(to target: @escaping @Sendable (MQTTMessage) -> Void) {}
    func connections(_ connected: @escaping @Sendable (Bool) -> Void, lost: @escaping @Sendable (String?) -> Void) {}
    func connectToBroker() async throws {}
    func onPublishRefused(_ handler: @escaping @Sendable (String, Int) -> Void) {}
    func subscribe(_ filters: [String], qos: MQTTQoS) async throws {}
    /// Through the fake's own ``DaemonTransport/subscribe(_:qos:)``; every filter granted.
    func subscribeAnswers(_ filters: [String]) async throws -> [MQTTSubscriptionAnswer] {
        try await subscribe(filters, qos: .atLeastOnce)
        return filters.map { _ in .granted(.atLeastOnce) }
    }
    func unsubscribe(_ filters: [String]) async throws {}
    func publish(_ message: OutgoingMessage) async throws(MQTTError) {}
    func enqueue(_ message: OutgoingMessage, acknowledged: (@Sendable (MQTTError?) -> Void)?) {}
    func pauseReading() {}
    func resumeReading() {}
    func shutdown(clean: Bool) async {}
}
