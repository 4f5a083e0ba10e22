import AmpelCore
import AmpelTestSupport
import Testing

@testable import AmpelMQTT

@Suite("Backoff, configuration checks, acknowledgement table")
struct MQTTInternalsTests {
    @Test func backoffDoublesAndIsBounded() {
        let backoff = Backoff(minimum: .milliseconds(100), maximum: .seconds(5))
        #expect(backoff.delay(attempt: 1, random: 0) == .milliseconds(100))
        #expect(backoff.delay(attempt: 2, random: 0) == .milliseconds(200))
        #expect(backoff.delay(attempt: 4, random: 0) == .milliseconds(800))
        #expect(backoff.delay(attempt: 10, random: 0) == .seconds(5))
        #expect(backoff.delay(attempt: 10_000, random: 0) == .seconds(5))
        #expect(backoff.delay(attempt: 1, random: 1) == .milliseconds(50))
        for attempt in 1...100 {
            let delay = backoff.delay(attempt: attempt, random: Double.random(in: -1...2))
            #expect(delay >= .milliseconds(50) && delay <= .seconds(5))
        }
    }

    @Test func persistentV5SessionNeedsExpiry() {
        var config = MQTTConfiguration(host: "h", clientID: "c")
        config.cleanStart = false
        #expect(throws: MQTTError.self) { try config.validate() }
        config.sessionExpiry = .seconds(3600)
        #expect(throws: Never.self) { try config.validate() }
        config.protocolVersion = .v311
        config.sessionExpiry = nil
        #expect(throws: Never.self) { try config.validate() }
    }

    @Test func inconsistentSettingsAreRejected() {
        func rejects(_ change: (inout MQTTConfiguration) -> Void) -> Bool {
            var config = MQTTConfiguration(host: "h", clientID: "c")
            change(&config)
            do { try config.validate(); return false } catch { return error.code == .invalidConfiguration || error.code == .invalidTopic }
        }
        #expect(rejects { $0.host = "" })
        #expect(rejects { $0.port = 0 })
        #expect(rejects { $0.cleanStart = false; $0.clientID = ""; $0.sessionExpiry = .seconds(1) })
        #expect(rejects { $0.keepAlive = .seconds(1) })
        #expect(rejects { $0.reconnectMinDelay = .seconds(10); $0.reconnectMaxDelay = .seconds(1) })
        #expect(rejects { $0.maxInflight = 0 })
        #expect(rejects { $0.receiveMaximum = 70_000 })
        #expect(rejects { $0.incomingBufferSize = 0 })
        #expect(rejects { $0.password = "p" })
        #expect(rejects { $0.tls = .init(caFile: "/ca", certFile: "/c") })
        #expect(rejects { $0.will = MQTTWill(topic: "a/#", payload: []) })
        #expect(!rejects { _ in })
    }

    @Test func ackTableHoldsOnlyWaitersAndDropsUnclaimedAnswers() {
        var table = AckTable<String>()
        // Answers nobody waits for (QoS 0 notes, enqueued QoS 1, re-subscribes) leave nothing behind,
        // so a later message reusing the id waits for its own answer.
        #expect(table.answer(mid: 3) == nil)
        #expect(table.waitingCount == 0)
        table.wait(mid: 3, token: 1, "first")
        #expect(table.waitingCount == 1)
        #expect(table.answer(mid: 3) == "first")
        #expect(table.answer(mid: 3) == nil)
        // A cancelled wait is found by its sender's token (the cancellation handler does not know
        // the message id), handed back once; the late answer then finds nothing.
        table.wait(mid: 9, token: 2, "cancelled")
        table.wait(mid: 10, token: 5, "other")
        let found = table.cancel(token: 2)
        #expect(found?.mid == 9 && found?.waiter == "cancelled")
        #expect(table.answer(mid: 9) == nil)
        #expect(table.cancel(token: 2) == nil)
        // Closing takes every waiter.
        #expect(table.cancel(token: 4) == nil)
        #expect(table.takeAll() == ["other"])
        #expect(table.waitingCount == 0)
    }
}

/// The topics kept to name a refused publish are let go once the broker answered: kept until
/// their message id came round again, up to 65,535 topic strings stayed alive.
@Suite("Publish topics", .timeLimit(.minutes(1)))
struct PublishTopicsTests {
    @Test func aSlotIsEmptiedByItsAnswer() {
        var topics = PublishTopics()
        topics.note("a/1", mid: 1)
        topics.note("a/2", mid: 2)
        topics.note("a/2 again", mid: 2)
        #expect(topics.count == 2)
        #expect(topics[2] == "a/2 again")
        topics.forget(mid: 1)
        topics.forget(mid: 1)
        topics.forget(mid: 70_000)
        #expect(topics.count == 1)
        #expect(topics[1] == nil)
    }

    @Test func answeredPublishesLeaveNoTopicBehind() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let client = try await broker.connectedClient("topics-held", .v5)
        for index in 0..<500 {
            try client.enqueue(topic: "held/\(index)", payload: bytes("x"), qos: index % 2 == 0 ? .atLeastOnce : .exactlyOnce)
        }
        // Answered after every publish before it (one connection, in order)...
        try await client.publish(topic: "held/last", payload: bytes("x"), qos: .exactlyOnce)
        // ...and this one in a later loop step of the network thread, which lets the topics of
        // a step's answers go at the step's end: all but this one's are gone when it returns.
        try await client.publish(topic: "held/sentinel", payload: bytes("x"), qos: .atLeastOnce)
        let held = client.session.machine.withLock { $0.heldTopics }
        #expect(held <= 1, "\(held) topics held for answered publishes")
        await client.disconnect()
    }
}
