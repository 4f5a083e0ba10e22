import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` tells the OwnTracks apps of a device's user about its alerts (`notify.owntracks`):
/// a transition on `owntracks/<user>/ampel/event` that the OwnTracks JSON schema accepts, and a
/// retained card; built binary, real mosquitto.
@Suite("ampel run sends alerts to the OwnTracks apps (built binary, real mosquitto)", .serialized)
struct RunOwnTracksNoticeTests {
    static let muenchen = RunCrashTests.muenchen      // 09162, red on 2020-10-15
    static let altoetting = RunCrashTests.altoetting  // 09171, green on 2020-10-15

    /// What the daemon writes and what the apps would read, with every device's state.
    static let topics = ["owntracks/+/+/event", "owntracks/+/+/info", "ampel/device/#", "ampel/bridge/state", "ampel/bridge/info"]

    static var options: Scene.Options {
        var options = Scene.Options()
        options.topics = topics
        return options
    }

    /// Runs the schema check (`Fixtures/owntracks/validate.py`, python3-jsonschema) on each
    /// payload; the errors of each, in the order given.
    static func schemaErrors(_ payloads: [String]) async throws -> [[String]] {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        var files: [String] = []
        for (index, payload) in payloads.enumerated() {
            let path = dir.appendingPathComponent("message-\(index).json").path
            try Data(payload.utf8).write(to: URL(fileURLWithPath: path))
            files.append(path)
        }
        let script = try fixture("owntracks/validate.py").path
        let schema = try fixture("owntracks/message.schema.json").path
        let (_, output) = try await ChildProcess.run("/usr/bin/python3", [script, schema] + files)
        var errors: [String: [String]] = [:]
        for line in output.split(separator: "\n") {
            guard let result = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let file = result["file"] as? String else { continue }
            errors[file] = result["errors"] as? [String] ?? ["unreadable result"]
        }
        try #require(errors.count == payloads.count,
                     "the validator answered for every message (it needs python3-jsonschema: scripts/install-deps.sh): \(output)")
        return files.map { errors[$0] ?? ["no answer"] }
    }

    @Test("the schema check can fail: the OwnTracks samples' transition passes, its illegal-lat sibling and a fractional acc do not")
    func validatorRejects() async throws {
        let good = try String(contentsOf: try fixture("owntracks/transition.json"), encoding: .utf8)
        let illegal = try String(contentsOf: try fixture("owntracks/transition-illegal-lat.json"), encoding: .utf8)
        let fractional = #"{"_type":"transition","acc":0.5,"desc":"x","event":"enter","lat":1,"lon":2,"tst":3,"wtst":4}"#
        let noWtst = #"{"_type":"transition","acc":0,"desc":"x","event":"enter","lat":1,"lon":2,"tst":3}"#
        let errors = try await Self.schemaErrors([good, illegal, fractional, noWtst])
        #expect(errors[0] == [])
        #expect(!errors[1].isEmpty)
        #expect(!errors[2].isEmpty)
        #expect(!errors[3].isEmpty)
    }

    @Test("an OwnTracks phone crosses a phase border: a transition the OwnTracks schema accepts, with the alert's title in its language (de, en), and a retained card; plain and Traccar devices get none")
    func transitionOnCrossing() async throws {
        // A plain input with two levels gives keys shaped like OwnTracks keys: the input decides, not the key.
        var options = Self.options
        options.configuration = """
            lang: en
            inputs:
              plain: ampel/location/+/+
              traccar: traccar/positions
            devices:
              alice/phone: {lang: de}

            """
        try await Scene.run(options) { scene in
            let collector = scene.collector
            try await scene.start()

            try await scene.fix("alice/phone", at: Self.muenchen, tst: 1000, acc: 12, input: .owntracks)
            try await scene.fix("bob/phone", at: Self.muenchen, tst: 1000, acc: 12, input: .owntracks)
            try await scene.fix("carol/phone", at: Self.muenchen, tst: 1000)
            try await scene.fix("van7", at: Self.muenchen, tst: 1000, input: .traccar)
            try await collector.awaitStates(["alice/phone", "bob/phone", "carol/phone", "van7"], tst: 1000)
            try await scene.fix("alice/phone", at: Self.altoetting, tst: 1001, acc: 12, input: .owntracks)
            // The transition goes out before the state that follows it, on one connection: once the
            // state is here, so is every transition before it.
            try await collector.awaitStates(["alice/phone"], tst: 1001)

            let records = collector.records()
            // The OwnTracks apps' events (not `ampel/device/<key>/event`, Home Assistant's copy of an alert).
            let events = records.filter { $0.topic.hasPrefix("owntracks/") && $0.topic.hasSuffix("/event") }
            #expect(Set(events.map(\.topic)) == ["owntracks/alice/ampel/event", "owntracks/bob/ampel/event"], "\(events)")
            #expect(!records.contains { $0.topic.hasPrefix("owntracks/carol/") || $0.topic.contains("van7") && $0.topic.hasPrefix("owntracks/") })
            // What the phone shows after "Entering": the alert's district and title.
            func titles(_ key: String) -> [String] {
                records.filter { $0.topic == "ampel/device/\(key)/alert" }.compactMap(Self.desc(ofAlert:))
            }
            func descs(_ user: String) -> [String] {
                records.filter { $0.topic == "owntracks/\(user)/ampel/event" }.compactMap { RunCrashTests.Collector.field("desc", $0.payload) as? String }
            }
            #expect(descs("alice") == titles("alice/phone"))
            #expect(descs("alice") == ["SK München – Rot: 7-Tage-Inzidenz über 50", "LK Altötting – Grün: 7-Tage-Inzidenz unter 35"], "\(descs("alice"))")
            #expect(descs("bob") == titles("bob/phone"))
            #expect(descs("bob") == ["SK München – Red: 7-day incidence above 50"], "\(descs("bob"))")
            // Each transition right after its alert, before the state that witnesses both.
            // Among alice's own records: another device's QoS 1 messages may come in between, as a
            // QoS 2 announcement is forwarded at its PUBREL.
            for (index, record) in records.enumerated() where record.topic == "owntracks/alice/ampel/event" {
                func alices(_ record: Scene.Collector.Record) -> Bool {
                    record.topic.contains("/alice/") && record.topic != "owntracks/alice/ampel/info"
                        && record.topic != "ampel/device/alice/phone/event"  // Home Assistant's copy of the alert
                }
                let previous = records[..<index].last(where: alices)
                #expect(previous?.topic == "ampel/device/alice/phone/alert", "\(String(describing: previous))")
                let next = records[(index + 1)...].first(where: alices)
                #expect(next?.topic == "ampel/device/alice/phone/state", "\(String(describing: next))")
            }
            let last = try #require(events.last { $0.topic == "owntracks/alice/ampel/event" })
            #expect(RunCrashTests.Collector.field("tst", last.payload) as? Int == 1001)
            #expect(RunCrashTests.Collector.field("lat", last.payload) as? Double == Self.altoetting.0)
            #expect(RunCrashTests.Collector.field("event", last.payload) as? String == "enter")
            // iOS names the sender by it: "AM enters …", not "(null) enters …".
            #expect(RunCrashTests.Collector.field("tid", last.payload) as? String == "AM")

            // The cards, retained: what an app that connects now receives.
            let cards = try await scene.retained(["owntracks/+/+/info"], count: 2, timeout: 30)
            #expect(Set(cards.map(\.topic)) == ["owntracks/alice/ampel/info", "owntracks/bob/ampel/info"], "\(cards)")
            #expect(cards.allSatisfy { RunCrashTests.Collector.field("name", $0.payload) as? String == "Ampel" })
            #expect(records.filter { $0.topic.hasPrefix("owntracks/") && $0.topic.hasSuffix("/info") }.count == 2, "one card per user")

            // The schema decides: every transition and card the daemon sent.
            let payloads = events.map(\.payload) + cards.map(\.payload)
            let errors = try await Self.schemaErrors(payloads)
            for (payload, errors) in zip(payloads, errors) { #expect(errors == [], "\(payload)") }

            // bridge/info counts them apart from the alerts (it follows the counters within a second).
            let (transitionCount, alertCount) = (events.count, records.filter { $0.topic.hasSuffix("/alert") }.count)
            try #require(alertCount > transitionCount, "plain and Traccar devices had alerts without transitions")
            try await collector.wait("bridge/info counting \(transitionCount) transitions and \(alertCount) alerts") { records in
                records.contains { record in
                    guard record.topic == "ampel/bridge/info", let counters = RunCrashTests.Collector.field("counters", record.payload) as? [String: Any]
                    else { return false }
                    return counters["owntracksTransitions"] as? Int == transitionCount && counters["alerts"] as? Int == alertCount
                }
            }
            try await scene.stop()
        }
    }

    // MARK: - Exactly once across kill -9

    /// Each user's transitions as their `desc`s, and each phone's alerts as `from>to`.
    static func received(_ collector: RunCrashTests.Collector, users: Int) -> (transitions: [[String]], alerts: [[String]]) {
        let records = collector.records()
        let alerts = collector.alerts()
        return ((0..<users).map { user in
            records.filter { $0.topic == "owntracks/u\(user)/ampel/event" }.compactMap { RunCrashTests.Collector.field("desc", $0.payload) as? String }
        }, (0..<users).map { alerts["u\($0)/phone"] ?? [] })
    }

    /// `AMPEL_TEST_CRASH_AFTER_ALERTS` counts journal writes that hold announcements: one per
    /// decision here. Two points, an odd and an even one: had the transition a journal write of
    /// its own after the alert's, one of them would fall between the two and lose it.
    @Test("killed after deciding an alert and before handing it over: the restart sends the alert and its transition, each exactly once",
          arguments: [7, 8])
    func killBetweenDecisionAndPublish(crashAfter: Int) async throws {
        try await Scene.run(Self.options) { scene in
            let collector = scene.collector
            let users = 20
            let keys = (0..<users).map { "u\($0)/phone" }
            try await scene.start()
            try await scene.round(keys: keys, at: Self.muenchen, tst: 100, input: .owntracks)
            try await collector.awaitStates(keys, tst: 100)
            try await scene.stop()
            // The n-th decision of this run is journaled with its alert and transition, then the process dies.
            try await scene.start(environment: ["AMPEL_TEST_CRASH_AFTER_ALERTS": "\(crashAfter)"])
            try await scene.round(keys: keys, at: Self.altoetting, tst: 200, input: .owntracks)
            try await scene.awaitCrash()
            try await scene.start()
            try await collector.awaitStates(keys, tst: 200)
            try await scene.stop()
            let (transitions, alerts) = Self.received(collector, users: users)
            let titles = collector.records().filter { $0.topic == "ampel/device/u0/phone/alert" }.compactMap(Self.desc(ofAlert:))
            #expect(titles.count == 2)
            for user in 0..<users {
                #expect(alerts[user] == ["null>red", "red>green"], "u\(user): \(alerts[user])")
                #expect(transitions[user] == titles, "u\(user): \(transitions[user])")
            }
        }
    }

    @Test("phones cross a phase border in rounds; the daemon is killed 0 ms to 300 ms after each: no transition lost, a repeat only in the witness gap")
    func killAfterCrossings() async throws {
        try await Scene.run(Self.options) { scene in
            let collector = scene.collector
            let users = 30
            let keys = (0..<users).map { "u\($0)/phone" }
            let delays: [Duration] = [.zero, .milliseconds(5), .milliseconds(20), .milliseconds(80), .milliseconds(300)]
            try await scene.start()
            var expected: [String] = []
            var phases: [String] = []
            // What reached the broker from each killed run: its records up to its Last Will.
            var killedRuns: [[RunCrashTests.Collector.Record]] = []
            var previous = "null"
            for (round, delay) in delays.enumerated() {
                let phase = round % 2 == 0 ? "red" : "green"
                expected.append("\(previous)>\(phase)")
                phases.append(phase)
                previous = phase
                let mark = collector.mark
                try await scene.round(keys: keys, at: round % 2 == 0 ? Self.muenchen : Self.altoetting, tst: 1000 + round, input: .owntracks)
                if delay > .zero { await threadSleep(for: delay) }
                try await scene.kill()
                killedRuns.append(collector.records(since: mark))
                try await scene.start()
                try await collector.awaitStates(keys, tst: 1000 + round)
            }
            try await scene.stop()
            let (transitions, alerts) = Self.received(collector, users: users)
            let titles = ["red": "Red", "green": "Green"]
            var repeats = 0
            // Repeated alerts per kill: only in its witness gap, which holds one alert at most.
            var alertRepeats = [Int](repeating: 0, count: delays.count)
            for user in 0..<users {
                var runs: [(alert: String, count: Int)] = []
                for alert in alerts[user] {
                    if runs.last?.alert == alert { runs[runs.count - 1].count += 1 } else { runs.append((alert, 1)) }
                }
                #expect(runs.map(\.alert) == expected, "u\(user): \(alerts[user])")
                for (round, run) in zip(killedRuns.indices, runs) where run.count > 1 {
                    alertRepeats[round] += run.count - 1
                    let gap = RunCrashTests.Collector.inWitnessGap("ampel/device/u\(user)/phone", phase: phases[round], in: killedRuns[round])
                    #expect(run.count == 2 && gap, "u\(user): \(run.alert) \(run.count) times, not in the witness gap of kill \(round)")
                }
                var distinct: [String] = []
                for desc in transitions[user] where distinct.last != desc { distinct.append(desc) }
                repeats += transitions[user].count - distinct.count
                // One transition per crossing, in order: red, green, red, …
                #expect(distinct.count == expected.count, "u\(user): \(transitions[user])")
                for (desc, crossing) in zip(distinct, expected) {
                    let to = String(crossing.split(separator: ">").last ?? "")
                    #expect(desc.contains(" – " + (titles[to] ?? "?")), "u\(user): \(desc) for \(crossing)")
                }
            }
            print("kill -9 during \(delays.count) rounds of \(users) OwnTracks crossings: \(repeats) transitions, \(alertRepeats) alerts repeated")
            #expect(repeats <= delays.count, "\(repeats) repeats over \(delays.count) crashes")
            #expect(alertRepeats.allSatisfy { $0 <= 1 }, "repeated alerts per kill: \(alertRepeats)")
        }
    }

    /// The transition's `desc` an alert makes: its district's name and its title.
    static func desc(ofAlert record: Scene.Collector.Record) -> String? {
        guard let title = RunCrashTests.Collector.field("title", record.payload) as? String,
              let district = RunCrashTests.Collector.field("district", record.payload) as? [String: Any],
              let name = district["name"] as? String else { return nil }
        return "\(name) – \(title)"
    }
}
