import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` with `alerts.max_fix_age`, `inputs.max_accuracy` and `alerts.min_dwell` against a
/// real mosquitto: an old fix and an inaccurate fix send no alert, a 60 s dwell swallows a 20 s
/// excursion and lets a stay through, and `bridge/info` counts what was held back; a phone first
/// seen by its queue of old fixes gets its first alert with its first fresh fix, across crashes.
@Suite("ampel run alerts only when they matter (built binary, real mosquitto)")
struct RunAlertRulesTests {
    static let muenchen = RunCrashTests.muenchen      // red on 2020-10-15
    static let altoetting = RunCrashTests.altoetting  // green on 2020-10-15

    @Test("an old fix and an inaccurate fix send no alert; a dwell of 60 s suppresses a 20 s excursion and sends a stay once")
    func alertRules() async throws {
        // Its own max_fix_age, not the replays' `false`.
        var options = Scene.Options()
        options.replay = false
        options.configuration = """
            alerts:
              max_fix_age: 15m
              min_dwell: 60s
            inputs:
              max_accuracy: 1000
            # Each fix's state shows how far the daemon got and the phase it kept.
            outputs:
              device_state: every_fix
            """
        try await Scene.run(options) { scene in
            let collector = scene.collector
            func fix(_ key: String, _ place: (Double, Double), tst: Int, acc: Int? = nil) async throws {
                try await scene.fix(key, at: place, tst: tst, acc: acc)
            }
            try await scene.start()
            // The fixes' own times, against the daemon's clock.
            let now = Int(Date().timeIntervalSince1970)

            // A phone's queue delivered late: a first sighting two hours ago, a crossing one hour
            // ago; neither alerts (both counted), the state follows them.
            try await fix("queued", Self.muenchen, tst: now - 7200)
            try await fix("queued", Self.altoetting, tst: now - 3600)
            try await collector.awaitStates(["queued"], tst: now - 3600)

            // A coarse fix on the other side of a border; then a coarse one at home, which is used.
            try await fix("coarse", Self.muenchen, tst: now - 300, acc: 10)
            try await fix("coarse", Self.altoetting, tst: now - 290, acc: 5000)
            try await fix("coarse", Self.muenchen, tst: now - 280, acc: 5000)
            try await collector.awaitStates(["coarse"], tst: now - 280)

            // A car on a border road: 20 s on the other side, then back.
            let excursion = [now - 150, now - 140, now - 130]
            try await fix("car", Self.muenchen, tst: now - 200)
            for tst in excursion { try await fix("car", Self.altoetting, tst: tst) }
            try await fix("car", Self.muenchen, tst: now - 120)
            try await collector.awaitStates(["car"], tst: now - 120)

            // Every alert for these fixes went out before the states awaited (the alert first, then its state).
            var alerts = collector.alerts()
            #expect(alerts["queued"] == nil)
            #expect(alerts["coarse"] == ["null>red"])
            #expect(alerts["car"] == ["null>red"])
            let states = collector.records().filter { $0.topic == "ampel/device/car/state" }
            // One state per fix the car sent: before, during and after the excursion.
            #expect(states.count == excursion.count + 2, "\(states)")
            #expect(states.allSatisfy { RunCrashTests.Collector.field("phase", $0.payload) as? String == "red" }, "\(states)")

            // The same road, now a stay of a minute: one alert, at the fix that completes it.
            for tst in [now - 100, now - 70, now - 41] { try await fix("car", Self.altoetting, tst: tst) }
            try await collector.awaitStates(["car"], tst: now - 41)
            #expect(collector.alerts()["car"] == ["null>red"])
            try await fix("car", Self.altoetting, tst: now - 40)
            try await collector.awaitStates(["car"], tst: now - 40)
            alerts = collector.alerts()
            #expect(alerts["car"] == ["null>red", "red>green"])

            try await collector.wait("bridge/info counting what was held back") { records in
                records.contains { record in
                    guard record.topic == "ampel/bridge/info", let counters = RunCrashTests.Collector.field("counters", record.payload) as? [String: Any] else {
                        return false
                    }
                    let suppressed = counters["alertsSuppressed"] as? [String: Int]
                    let dropped = counters["dropped"] as? [String: Int]
                    return suppressed == ["old-fix": 2, "dwell": 1] && dropped?["inaccurate"] == 1
                }
            }
            try await scene.stop()
        }
    }

    @Test("an OwnTracks phone first seen by a queue 2 h old alerts no one; after a kill -9 its first fresh fix in the same phase alerts once as a first sighting, and a kill after that sends it no more")
    func oldFirstSighting() async throws {
        var options = Scene.Options()
        options.replay = false
        options.topics += ["owntracks/+/ampel/event"]
        // Each fix's state shows that the daemon handled it (`on_change` would skip the queue's second).
        options.configuration = "alerts:\n  max_fix_age: 15m\noutputs:\n  device_state: every_fix\n"
        try await Scene.run(options) { scene in
            let collector = scene.collector
            let phone = "alice/phone"
            func transitions() -> Int { collector.records().filter { $0.topic == "owntracks/alice/ampel/event" }.count }
            try await scene.start()
            let queued = Int(Date().timeIntervalSince1970) - 7200
            try await scene.fix(phone, at: Self.muenchen, tst: queued, input: .owntracks)
            try await scene.fix(phone, at: Self.muenchen, tst: queued + 60, input: .owntracks)
            try await collector.awaitStates([phone], tst: queued + 60)
            // The state goes out as usual; its alert would have gone before it, on one connection.
            #expect(collector.alerts()[phone] == nil)
            #expect(transitions() == 0)
            try await collector.wait("bridge/info counting the first sighting held back") { records in
                records.contains { record in
                    guard record.topic == "ampel/bridge/info",
                          let counters = RunCrashTests.Collector.field("counters", record.payload) as? [String: Any] else { return false }
                    return counters["alertsSuppressed"] as? [String: Int] == ["old-fix": 1]
                }
            }
            // Killed: only the journal can say that the phone was never announced.
            try await scene.kill()
            try await scene.start()
            #expect(collector.alerts()[phone] == nil, "a restart is no reason to alert")
            let fresh = Int(Date().timeIntervalSince1970)
            try await scene.fix(phone, at: Self.muenchen, tst: fresh, input: .owntracks)
            try await collector.awaitStates([phone], tst: fresh)
            #expect(collector.alerts()[phone] == ["null>red"])
            #expect(transitions() == 1)
            try await scene.kill()
            try await scene.start()
            try await scene.fix(phone, at: Self.muenchen, tst: fresh + 1, input: .owntracks)
            try await collector.awaitStates([phone], tst: fresh + 1)
            #expect(collector.alerts()[phone] == ["null>red"], "announced once")
            #expect(transitions() == 1)
            try await scene.stop()
        }
    }
}
