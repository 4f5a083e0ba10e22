import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Synchronization
import Testing

/// A client made with a message handler hands every message to it, in order, and none to
/// `messages` (the daemon's intake: one hand-off from the network thread to its own queue).
@Suite("Message handler", .timeLimit(.minutes(1)))
struct MQTTHandlerTests {
    @Test(arguments: [MQTTConfiguration.ProtocolVersion.v311, .v5])
    func handlerGetsEveryMessageInOrder(_ version: MQTTConfiguration.ProtocolVersion) async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let (stream, continuation) = AsyncStream<MQTTMessage>.makeStream()
        let subscriber = MQTTClient(configuration: broker.configuration("handler-sub", version)) { message in
            continuation.yield(message)
        }
        try await subscriber.connect()
        try await subscriber.subscribe([("h/#", .atLeastOnce)])
        let publisher = try await broker.connectedClient("handler-pub", version)
        let payloads = (0..<500).map { bytes("fix \($0)") }
        for payload in payloads {
            try publisher.enqueue(topic: "h/dev", payload: payload, qos: .atLeastOnce)
        }
        var received: [MQTTMessage] = []
        for await message in stream {
            received.append(message)
            if received.count == payloads.count { break }
        }
        #expect(received.map(\.payload) == payloads)
        #expect(received.allSatisfy { $0.topic == "h/dev" && $0.qos == .atLeastOnce })
        #expect(subscriber.counters.received == payloads.count)

        // Nothing went to `messages`: it ends empty on disconnect.
        await subscriber.disconnect()
        var leftovers = 0
        for await _ in subscriber.messages { leftovers += 1 }
        #expect(leftovers == 0)
        await publisher.disconnect()
    }
}

/// A consumer that prefers the client's task executor runs where the messages arrive: on the
/// network thread, between its reads and writes (the daemon's loop, decision 27).
@Suite("Network thread executor", .timeLimit(.minutes(1)))
struct NetworkThreadExecutorTests {
    /// A client whose handler feeds `stream`, subscribed to `<prefix>/in`, and a peer that reads
    /// `<prefix>/out`, on `broker`.
    struct Pair {
        let stream: AsyncStream<MQTTMessage>
        let continuation: AsyncStream<MQTTMessage>.Continuation
        let client: MQTTClient
        let peer: MQTTClient
        let replies: MessageCollector

        init(_ broker: MosquittoBroker, clientID: String, prefix: String) async throws {
            let (stream, continuation) = AsyncStream<MQTTMessage>.makeStream()
            (self.stream, self.continuation) = (stream, continuation)
            client = MQTTClient(configuration: broker.configuration(clientID)) { continuation.yield($0) }
            try await client.connect()
            try await client.subscribe([("\(prefix)/in", .atLeastOnce)])
            (peer, replies) = try await broker.subscribedClient(clientID + "-peer", [("\(prefix)/out", .atLeastOnce)])
        }
    }

    @Test func consumerRunsOnTheNetworkThreadAndElsewhereWhenWokenElsewhere() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let pair = try await Pair(broker, clientID: "exec-sub", prefix: "x")
        let networkThread = "mqtt-exec-sub"

        // Each message is answered with the name of the thread that handled it; after the
        // 5th, the consumer sleeps once first (a timer on another thread wakes it).
        let work = Task {
            await withTaskExecutorPreference(pair.client.taskExecutor) {
                var handled = 0
                for await message in pair.stream {
                    handled += 1
                    var answer = currentThreadName()
                    if handled == 5 {
                        try? await Task.sleep(for: .milliseconds(5))
                        answer += " after-sleep " + currentThreadName()
                    }
                    try? pair.client.enqueue(topic: "x/out", payload: message.payload + bytes(" " + answer), qos: .atLeastOnce)
                }
                return currentThreadName()
            }
        }
        // One message at a time: the next goes once the answer to the last is in.
        var answers: [String] = []
        for index in 1...12 {
            try await pair.peer.publish(topic: "x/in", payload: bytes("m\(index)"), qos: .atLeastOnce)
            answers = try await pair.replies.wait(for: index).map(text)
        }
        #expect(answers.map { $0.split(separator: " ")[0] } == (1...12).map { "m\($0)" })
        let names = answers.map { String($0.split(separator: " ")[1]) }
        // A message that finds the consumer waiting runs it on the network thread. One that
        // comes while it still runs elsewhere (where it started, or after the timer below, until
        // it waits again) is taken there: a race of a few microseconds against the round trip,
        // so almost all, never none (forwarding every job, none were).
        let onNetworkThread = names.filter { $0 == networkThread }.count
        #expect(onNetworkThread >= names.count - 3, "\(names)")
        // The timer's wake-up runs it on the global executor.
        let afterSleep = try #require(answers[4].components(separatedBy: " after-sleep ").last)
        #expect(afterSleep != networkThread)

        // Disconnected, the client runs nothing: the consumer still ends (it does not hang on the
        // network thread that has exited) on the global executor.
        await pair.client.disconnect()
        pair.continuation.finish()
        #expect(await work.value != networkThread)
        await pair.peer.disconnect()
    }

    /// The daemon's shape: an actor's method loops over the messages and yields now and then.
    /// A default actor runs where its caller's task prefers, and a yield on the network thread
    /// comes back to it after the thread's socket work.
    actor Consumer {
        var names: [String] = []
        func run(_ stream: AsyncStream<MQTTMessage>, answering client: MQTTClient) async -> [String] {
            for await message in stream {
                names.append(currentThreadName())
                await Task.yield()
                names.append(currentThreadName())
                try? client.enqueue(topic: "y/out", payload: message.payload, qos: .atLeastOnce)
            }
            return names
        }
    }

    @Test func anActorIsolatedConsumerThatYieldsStaysOnTheNetworkThread() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let pair = try await Pair(broker, clientID: "exec-actor", prefix: "y")
        let consumer = Consumer()
        let work = Task {
            await withTaskExecutorPreference(pair.client.taskExecutor) { await consumer.run(pair.stream, answering: pair.client) }
        }
        for index in 1...10 {
            try await pair.peer.publish(topic: "y/in", payload: bytes("m\(index)"), qos: .atLeastOnce)
            _ = try await pair.replies.wait(for: index)
        }
        await pair.client.disconnect()
        pair.continuation.finish()
        let names = await work.value
        #expect(names.count == 20)
        // As in the test above: almost all, a yield included (its job comes back to this thread).
        let onNetworkThread = names.filter { $0 == "mqtt-exec-actor" }.count
        #expect(onNetworkThread >= names.count - 4, "\(names)")
        await pair.peer.disconnect()
    }
}

/// A handler that pauses reading (the daemon's intake, once full) gets no further message from
/// the loop step that called it: the rest of what one recv brought in waits for the resume.
@Suite("Pausing from the message handler", .timeLimit(.minutes(1)))
struct MQTTHandlerPauseTests {
    struct Seen {
        var total = 0
        var whilePaused = 0
        var paused = false
    }

    @Test func aPauseFromTheHandlerEndsTheStepsReads() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let count = 200
        let seen = Mutex(Seen())
        let (stepEnded, stepEndedContinuation) = AsyncStream<Void>.makeStream()
        let (allIn, allInContinuation) = AsyncStream<Void>.makeStream()
        let box = Mutex<MQTTClient?>(nil)
        // Pauses on `p/arm` and on the first of the rest; a job queued then runs after the
        // step's reads, before its write, and says the step has ended.
        let subscriber = MQTTClient(configuration: broker.configuration("pause-sub")) { message in
            let pauseNow = message.topic == "p/arm" || seen.withLock { seen -> Bool in
                seen.total += 1
                if seen.paused { seen.whilePaused += 1 }
                if seen.total == count { allInContinuation.yield() }
                guard seen.total == 1 else { return false }
                seen.paused = true
                return true
            }
            guard pauseNow, let client = box.withLock({ $0 }) else { return }
            client.pauseReading()
            Task(executorPreference: client.taskExecutor) { stepEndedContinuation.yield() }
        }
        box.withLock { $0 = subscriber }
        try await subscriber.connect()
        try await subscriber.subscribe([("p/#", .atMostOnce)])
        var steps = stepEnded.makeAsyncIterator()

        // Paused by its handler, the subscriber polls without reading from its next step on.
        let (publisher, echo) = try await broker.subscribedClient("pause-pub", [("sync/#", .atLeastOnce)])
        try await publisher.publish(topic: "p/arm", payload: bytes("arm"), qos: .atMostOnce)
        _ = await steps.next()
        // All messages wait in the subscriber's socket before it reads again: the publisher's
        // own echo, sent after them, comes back once the broker has passed them all on.
        for index in 0..<count {
            try publisher.enqueue(topic: "p/x", payload: bytes("m\(index)"), qos: .atMostOnce)
        }
        try await publisher.publish(topic: "sync/1", payload: bytes("after"), qos: .atLeastOnce)
        _ = try await echo.wait(for: 1)

        subscriber.resumeReading()
        _ = await steps.next()
        let first = seen.withLock { $0 }
        #expect(first.total == 1)
        #expect(first.whilePaused == 0)

        seen.withLock { $0.paused = false }
        subscriber.resumeReading()
        for await _ in allIn { break }
        #expect(seen.withLock { $0.total } == count)
        await subscriber.disconnect()
        await publisher.disconnect()
    }
}
