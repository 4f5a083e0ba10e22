import Testing

@testable import AmpelMQTT

@Suite("Backoff, configuration checks, acknowledgement table")
struct MQTTInternalsTests {
    @Test func backoffDoublesAndIsBounded() {
        let backoff = MQTTBackoff(minimum: .milliseconds(100), maximum: .seconds(5))
        #expect(backoff.delay(attempt: 1, jitter: 1) == .milliseconds(100))
        #expect(backoff.delay(attempt: 2, jitter: 1) == .milliseconds(200))
        #expect(backoff.delay(attempt: 4, jitter: 1) == .milliseconds(800))
        #expect(backoff.delay(attempt: 10, jitter: 1) == .seconds(5))
        #expect(backoff.delay(attempt: 10_000, jitter: 1) == .seconds(5))
        #expect(backoff.delay(attempt: 1, jitter: 0.5) == .milliseconds(50))
        for attempt in 1...100 {
            let delay = backoff.delay(attempt: attempt, jitter: Double.random(in: 0...2))
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

    @Test func ackTableMatchesEarlyLateAndIgnoredAnswers() async {
        var table = AckTable()
        // Answer before the sender registered: kept and handed over on registration.
        #expect(table.answer(mid: 1, .published(reason: 0)) == nil)
        let early: AckResult = await withCheckedContinuation { continuation in
            let result = table.wait(mid: 1, continuation)
            continuation.resume(returning: result ?? .failed(MQTTError(code: .unknown, message: "not answered")))
        }
        guard case .published(reason: 0) = early else {
            Issue.record("early answer lost: \(early)")
            return
        }
        // QoS 0 ids are dropped whether their note comes before or after the registration.
        table.ignoreQoS0(mid: 2)
        #expect(table.answer(mid: 2, .published(reason: 0)) == nil)
        #expect(table.answer(mid: 3, .published(reason: 0)) == nil)
        table.ignoreQoS0(mid: 3)
        // Nothing left behind: a later publish reusing id 3 waits for its own answer.
        var registered = false
        let reused: AckResult = await withCheckedContinuation { continuation in
            let immediate = table.wait(mid: 3, continuation)
            registered = immediate == nil && table.waitingCount == 1
            let taken = table.takeAll()
            if let immediate {
                continuation.resume(returning: immediate)
            } else {
                taken.first?.resume(returning: .failed(MQTTError(code: .closed, message: "closed")))
            }
        }
        if case .published = reused { Issue.record("reused id answered by a stale acknowledgement") }
        #expect(registered)
        // A waiter answered later gets the answer; an ignored (cancelled) id does not leak.
        #expect(table.cancel(mid: 9) == nil)
        table.ignore(mid: 10)
        #expect(table.answer(mid: 10, .published(reason: 0)) == nil)
        #expect(table.waitingCount == 0)
    }
}
