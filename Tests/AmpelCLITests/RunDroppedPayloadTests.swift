import AmpelTestSupport
import Foundation
import Testing

/// Bad payloads in the log of `ampel run`, as docs/topics.md ("Bad payloads") promises: at most
/// 5 warnings per 10 s, each naming the topic and the reason, then one line with the number
/// held back, written when the 10 s are over even if no bad payload follows.
@Suite("ampel run logs dropped payloads within its limit (built binary, real mosquitto)")
struct RunDroppedPayloadTests {
    @Test("6 bad payloads in a second: 5 warnings naming topic and reason, then one line holding back 1")
    func sixBadPayloads() async throws {
        // One device key each, so every line says which payload it is about; `lat 999` first.
        let payloads: [(key: String, payload: String, reason: String)] = [
            ("bad-1", #"{"lat":999,"lon":11.5}"#, "invalid-coordinates"),
            ("bad-2", "not json", "not-json"),
            ("bad-3", #"{"lon":11.5}"#, "missing-coordinates"),
            ("bad-4", #"{"lat":"north","lon":11.5}"#, "invalid-coordinates"),
            ("bad-5", #"{"lat":48.1,"lon":11.5,"tst":"soon"}"#, "invalid-timestamp"),
            ("bad-6", #"{"lat":48.1,"lon":181}"#, "invalid-coordinates"),
        ]
        try await Scene.run { scene in
            let daemon = try await scene.start()
            let started = ContinuousClock.now
            // One after the other, each acknowledged before the next: the daemon reads them in
            // this order, so the sixth is the one held back.
            for item in payloads {
                try await Scene.publish(scene.broker, [("ampel/location/\(item.key)", item.payload)])
            }
            let published = ContinuousClock.now - started
            // The limit's window is 10 s: all six must fall into one for the count to hold.
            try #require(published < .seconds(10), "publishing took \(published)")

            for item in payloads.prefix(5) {
                try await daemon.awaitLog("reason=\(item.reason) topic=ampel/location/\(item.key) [AmpelDaemon] dropped a location message",
                                          timeout: .seconds(30))
            }
            // No seventh payload comes: the tick reports the count once the window is over.
            try await daemon.awaitLog("[AmpelDaemon] held back further warnings of dropped location messages", timeout: .seconds(30))

            let lines = daemon.stderr.split(separator: "\n")
            let dropped = lines.filter { $0.hasSuffix("[AmpelDaemon] dropped a location message") }
            #expect(dropped.count == 5, "\(dropped.joined(separator: "\n"))")
            #expect(!dropped.contains { $0.contains("topic=ampel/location/bad-6") })
            #expect(dropped.first?.contains("detail=coordinates out of range") == true, "the lat 999 line: \(dropped.first ?? "none")")
            let held = lines.filter { $0.contains("held back further warnings") }
            #expect(held.count == 1)
            #expect(held.first?.contains("held=1 ") == true, "\(held)")
            #expect(held.first?.contains("limit=5 lines per 10 s") == true, "\(held)")
            // Every one is counted, the held-back one too.
            let info = try await scene.retainedInfo()
            let counters = try #require(info["counters"] as? [String: Any])
            let byReason = try #require(counters["dropped"] as? [String: Any], "\(counters)")
            #expect(byReason["invalid-coordinates"] as? Int == 3, "\(byReason)")
            try await scene.stop()
        }
    }
}
