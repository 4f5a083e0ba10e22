import AmpelMessages
@testable import AmpelDaemon
import AmpelMQTT
import Testing

/// The delayed publishes (a new device's alert copy for Home Assistant): one queue, one task.
@Suite(.timeLimit(.minutes(1)))
struct DelayedPublishesTests {
    /// Hands each enqueued message to the test with the instant it came.
    final class Receiver: StubTransport {
        let received: AsyncStream<(topic: String, at: ContinuousClock.Instant)>
        private let continuation: AsyncStream<(topic: String, at: ContinuousClock.Instant)>.Continuation
        init() { (received, continuation) = AsyncStream.makeStream() }
        func enqueue(_ message: OutgoingMessage, acknowledged: (@Sendable (MQTTError?) -> Void)?) {
            continuation.yield((message.topic, .now))
        }
    }

    @Test("each message goes once its delay has passed, in the order added, also when added while others wait or after the queue ran dry")
    func inOrderAfterTheDelay() async throws {
        let transport = Receiver()
        let delayed = DelayedPublishes(transport: transport)
        let delay = Duration.milliseconds(300)
        var added: [(topic: String, at: ContinuousClock.Instant)] = []
        func add(_ topic: String) {
            added.append((topic, .now))
            #expect(delayed.add(OutgoingMessage(topic: topic, text: "x", qos: .exactlyOnce, retain: false), after: delay))
        }
        for index in 0..<150 { add("first/\(index)") }
        // Time itself is under test here: the second batch falls due half a delay after the first.
        try await Task.sleep(for: delay / 2)
        for index in 0..<100 { add("second/\(index)") }
        var received = transport.received.makeAsyncIterator()
        var got: [(topic: String, at: ContinuousClock.Instant)] = []
        while got.count < 150, let next = await received.next() { got.append(next) }
        // The first batch is out, the second still waits.
        #expect(delayed.waiting == 100)
        while got.count < 250, let next = await received.next() { got.append(next) }
        #expect(delayed.waiting == 0)
        // After the queue ran dry: taken again.
        add("third")
        if let next = await received.next() { got.append(next) }
        #expect(got.map(\.topic) == added.map(\.topic))
        for (sent, came) in zip(added, got) {
            #expect(came.at - sent.at >= delay, "\(sent.topic) came \(came.at - sent.at) after it was added")
        }
    }

    @Test("at most limit messages wait: the next is refused, and taken again once the queue has room")
    func bounded() async throws {
        let transport = Receiver()
        let delayed = DelayedPublishes(transport: transport)
        let message = OutgoingMessage(topic: "t", text: "x", qos: .exactlyOnce, retain: false)
        // Two seconds: the queue must still be full when the last add comes, however slow the machine.
        for _ in 0..<DelayedPublishes.limit { #expect(delayed.add(message, after: .seconds(2))) }
        #expect(!delayed.add(message, after: .seconds(2)))
        #expect(delayed.waiting == DelayedPublishes.limit)
        var received = transport.received.makeAsyncIterator()
        for _ in 0..<DelayedPublishes.limit { _ = await received.next() }
        #expect(delayed.add(message, after: .milliseconds(1)))
    }

    /// Refuses messages whose topic starts with `refused/`, as a closed or disconnected client
    /// does, and hands the others to the test.
    final class Refuser: StubTransport {
        let received: AsyncStream<String>
        private let continuation: AsyncStream<String>.Continuation
        init() { (received, continuation) = AsyncStream.makeStream() }
        func enqueue(_ message: OutgoingMessage, acknowledged: (@Sendable (MQTTError?) -> Void)?) throws(MQTTError) {
            if message.topic.hasPrefix("refused/") { throw MQTTError(code: .closed, message: "client closed") }
            continuation.yield(message.topic)
        }
    }

    @Test("a message the transport refuses when it falls due is counted as a failure, and the ones after it still go")
    func refusedWhenDueIsCounted() async throws {
        let transport = Refuser()
        let delayed = DelayedPublishes(transport: transport)
        for topic in ["refused/1", "refused/2", "taken"] {
            #expect(delayed.add(OutgoingMessage(topic: topic, text: "x", qos: .exactlyOnce, retain: false), after: .milliseconds(1)))
        }
        // In order: once the last is taken, the two before it were tried.
        var received = transport.received.makeAsyncIterator()
        #expect(await received.next() == "taken")
        #expect(delayed.failures == 2)
    }
}

