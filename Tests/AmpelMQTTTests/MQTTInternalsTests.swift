import AmpelCore
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
