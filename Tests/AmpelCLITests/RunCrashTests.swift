import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` killed with SIGKILL at awkward moments, against a real mosquitto: every device
/// gets exactly one alert per phase change over the restarts, and its last state is right.
@Suite("ampel run survives kill -9 without repeating or losing an alert (built binary, real mosquitto)", .serialized)
struct RunCrashTests {
    static let muenchen = (48.1374, 11.5755)    // 09162, red on 2020-10-15
    static let altoetting = (48.2264, 12.6770)  // 09171, green on 2020-10-15

    /// The collector of ``Scene``, under the name the end-to-end suites know it by.
    typealias Collector = Scene.Collector

    /// One QoS 1 fix per device on the plain input (`ampel/location/<key>`), 20 publishers at a time.
    static func round(_ broker: MosquittoBroker, devices: Int, tst: Int, at place: (Double, Double)) async throws {
        try await send(broker, (0..<devices).map { ("dev\($0)", place) }, tst: tst)
    }

    /// One QoS 1 fix for each device at its place, on the plain input, 20 publishers at a time.
    static func send(_ broker: MosquittoBroker, _ fixes: [(key: String, place: (Double, Double))], tst: Int) async throws {
        try await send(host: broker.host, port: broker.port, fixes, tst: tst)
    }

    /// ``send(_:_:tst:)`` to any MQTT broker: `options` go to `mosquitto_pub` (`-V mqttv311`
    /// for nats-server), `prefix` is the input's topic before the key.
    @discardableResult
    static func send(host: String, port: Int, options: [String] = [], prefix: String = "ampel/location/",
                     _ fixes: [(key: String, place: (Double, Double))], tst: Int, checked: Bool = true) async throws -> Int {
        let messages = fixes.map { fix in
            let message = Scene.message(fix.key, at: fix.place, tst: tst)
            return (topic: prefix + fix.key, payload: message.payload)
        }
        return try await Scene.publish(host: host, port: port, options: options, messages, checked: checked)
    }

    @Test("devices cross a phase border in rounds; the daemon is killed 0 ms to 1.5 s after each round: no alert lost, a repeat only in the witness gap")
    func killAfterCrossings() async throws {
        try await Scene.run { scene in
            let devices = 40
            let keys = (0..<devices).map { "dev\($0)" }
            let delays: [Duration] = [.zero, .milliseconds(5), .milliseconds(20), .milliseconds(80), .milliseconds(300), .milliseconds(1500)]
            try await scene.start()
            var expected: [String] = []
            var logs: [String] = []
            var previous = "null"
            for (round, delay) in delays.enumerated() {
                let place = round % 2 == 0 ? Self.muenchen : Self.altoetting
                let phase = round % 2 == 0 ? "red" : "green"
                expected.append("\(previous)>\(phase)")
                previous = phase
                try await scene.round(keys: keys, at: place, tst: 1000 + round)
                // On the thread, not the task pool: a busy pool resumes a sleeping task late.
                if delay > .zero { await threadSleep(for: delay) }
                try await scene.kill()
                logs.append(scene.daemon?.stderr ?? "")
                try await scene.start()
                try await scene.collector.awaitStates(keys, tst: 1000 + round)
            }
            try await scene.stop()
            // None lost, in order. A repeat is possible only when the process died in the moment
            // between handing an alert and its witness (the state after it) to the kernel
            // (docs/DESIGN.md, decision 34): at most one per crash, and each is counted.
            let alerts = scene.collector.alerts()
            var repeats = 0
            for key in keys {
                let received = alerts[key] ?? []
                var distinct: [String] = []
                for alert in received where distinct.last != alert { distinct.append(alert) }
                repeats += received.count - distinct.count
                #expect(distinct == expected, "\(key): \(received)")
            }
            print("kill -9 during \(delays.count) rounds of \(devices) crossings: \(repeats) alerts repeated")
            #expect(repeats <= delays.count, "\(repeats) repeats over \(delays.count) crashes")
            if repeats > 0 { print(logs.joined(separator: "\n=====\n")) }
        }
    }

    @Test("killed between deciding an alert and handing it over: the restart sends exactly the ones not sent")
    func killBetweenDecisionAndPublish() async throws {
        try await Scene.run { scene in
            let keys = (0..<30).map { "dev\($0)" }
            try await scene.start()
            try await scene.round(keys: keys, at: Self.muenchen, tst: 100)
            try await scene.collector.awaitStates(keys, tst: 100)
            try await scene.stop()
            // The 12th alert of this run is journaled, then the process dies before handing it over.
            try await scene.start(environment: ["AMPEL_TEST_CRASH_AFTER_ALERTS": "12"])
            try await scene.round(keys: keys, at: Self.altoetting, tst: 200)
            try await scene.awaitCrash()
            try await scene.start()
            try await scene.collector.awaitStates(keys, tst: 200)
            try await scene.stop()
            let alerts = scene.collector.alerts()
            for key in keys {
                #expect(alerts[key] ?? [] == ["null>red", "red>green"], "\(key): \(alerts[key] ?? [])")
            }
        }
    }

    // MARK: - A new RKI publication

    /// Places in Bavarian districts, with the district the bundled geometry puts them in
    /// (checked against each device's state). Which of them change phase between the two
    /// recorded days is read from the recordings.
    static let publicationPlaces: [(ags: String, place: (Double, Double))] = [
        ("09462", (49.9456, 11.5713)),  // SK Bayreuth
        ("09663", (49.7913, 9.9534)),   // SK Würzburg
        ("09361", (49.4448, 11.8583)),  // SK Amberg
        ("09463", (50.2612, 10.9627)),  // SK Coburg
        ("09464", (50.3135, 11.9128)),  // SK Hof
        ("09562", (49.5897, 11.0078)),  // SK Erlangen
        ("09763", (47.7267, 10.3139)),  // SK Kempten (Allgäu)
        ("09188", (47.9973, 11.3397)),  // LK Starnberg
        ("09273", (48.9000, 11.8800)),  // LK Kelheim
        ("09162", (48.1374, 11.5755)),  // SK München
        ("09171", (48.2264, 12.6770)),  // LK Altötting
        ("09279", (48.6300, 12.4980)),  // LK Dingolfing-Landau
        ("09373", (49.2800, 11.4600)),  // LK Neumarkt i.d. OPf.
        ("09564", (49.4521, 11.0767)),  // SK Nürnberg
        ("09372", (49.4401, 12.6500)),  // LK Cham
    ]

    /// When the daemon dies after the new publication is in.
    enum PublicationKill: Sendable, CustomTestStringConvertible {
        /// SIGKILL this long after the first alert of the new day reached a subscriber.
        case afterFirstAlert(Duration)
        /// The daemon kills itself right after journaling the alert at this fraction of the
        /// expected ones, before handing it to the broker (`AMPEL_TEST_CRASH_AFTER_ALERTS`).
        case beforeHandingOver(alertAt: Double)

        var testDescription: String {
            switch self {
            case .afterFirstAlert(let delay): "kill -9 \(delay) after the first alert"
            case .beforeHandingOver(let fraction): "killed before handing over the alert at \(Int(fraction * 100)) %"
            }
        }
    }

    @Test("a new RKI publication, the daemon killed while it announces it: after the restart every changed device and district has exactly one alert, and the new phases are retained",
          arguments: [PublicationKill.afterFirstAlert(.zero), .afterFirstAlert(.milliseconds(50)), .afterFirstAlert(.milliseconds(300)),
                      .afterFirstAlert(.seconds(1)), .beforeHandingOver(alertAt: 0.25), .beforeHandingOver(alertAt: 0.8)])
    func killAfterNewPublication(_ moment: PublicationKill) async throws {
        let (day, next) = ("2020-11-05", "2020-11-23")
        let before = try rawBavarianIncidences(day: day).mapValues(expectedPhase)
        let after = try rawBavarianIncidences(day: next).mapValues(expectedPhase)
        // What the new day must announce, by topic prefix: "from>to".
        var expected: [String: String] = [:]
        for (ags, phase) in after where before[ags] != phase {
            expected["ampel/district/\(ags)"] = "\(before[ags] ?? "null")>\(phase)"
        }
        let devices = Self.publicationPlaces.enumerated().flatMap { index, place in
            (0..<2).map { (key: "p\(index)-\($0)", ags: place.ags, place: place.place) }
        }
        for device in devices {
            let from = try #require(before[device.ags]), to = try #require(after[device.ags])
            if from != to { expected["ampel/device/\(device.key)"] = "\(from)>\(to)" }
        }
        let changing = devices.filter { expected["ampel/device/\($0.key)"] != nil }.count
        try #require(changing > 0 && changing < devices.count, "the places must have districts that change phase and ones that keep it")

        var options = Scene.Options()
        options.topics = ["ampel/device/+/alert", "ampel/device/+/state", "ampel/district/+/alert", "ampel/district/+/phase",
                          "ampel/bridge/state", "ampel/bridge/info"]
        (options.http, options.source, options.date, options.arguments) = (true, "arcgis", nil, ["--refresh", "1"])
        try await Scene.run(options) { scene in
            let (server, collector) = (try #require(scene.server), scene.collector)
            try server.serve(contentsOf: RecordedRKI.url(day: day))
            @Sendable func info(of date: String) -> @Sendable (ArraySlice<Collector.Record>) -> Bool {
                { records in records.contains { $0.topic == "ampel/bridge/info" && $0.payload.contains(#""dataDate":"\#(date)""#) } }
            }

            // Day D in force (it replaces the bundled data the first start holds), then every
            // device seen once in it.
            try await scene.start()
            try await collector.wait("bridge/info of \(day)", until: info(of: day))
            try await Self.send(scene.broker, devices.map { ($0.key, $0.place) }, tst: 100)
            try await collector.awaitStates(devices.map(\.key), tst: 100)
            if case .beforeHandingOver(let fraction) = moment {
                // A run whose only alerts are the new day's, which dies after the N-th is journaled.
                try await scene.stop()
                let alert = max(1, min(expected.count, Int((Double(expected.count) * fraction).rounded())))
                try await scene.start(environment: ["AMPEL_TEST_CRASH_AFTER_ALERTS": "\(alert)"])
            }

            // Day D+1 is published; the daemon notices within its refresh and dies.
            let mark = collector.mark
            try server.serve(contentsOf: RecordedRKI.url(day: next))
            switch moment {
            case .afterFirstAlert(let delay):
                try await collector.wait("the first alert of \(next)", since: mark) { records in
                    records.contains { $0.topic.hasSuffix("/alert") && $0.payload.contains(#""dataDate":"\#(next)""#) }
                }
                if delay > .zero { await threadSleep(for: delay) }
                try await scene.kill()
            case .beforeHandingOver:
                try await scene.awaitCrash()  // it dies by itself
            }
            // The records up to the Last Will are all of the killed run's that reached the broker.
            var logs = [scene.daemon?.stderr ?? ""]
            let killedRun = collector.records(since: mark)

            // The restart, on the same state directory and the same (new) data.
            let restart = collector.mark
            let daemon = try await scene.start()
            try await collector.wait("bridge/info of \(next) after the restart", since: restart, until: info(of: next))
            try await scene.stop()
            logs.append(daemon.stderr)

            // Exactly one alert per change, over the kill and the restart, and none for the rest.
            var received: [String: [String]] = [:]
            for record in collector.records(since: mark) where record.topic.hasSuffix("/alert") {
                let from = Collector.field("from", record.payload) as? String ?? "null"
                let to = Collector.field("to", record.payload) as? String ?? "?"
                let date = Collector.field("dataDate", record.payload) as? String ?? "?"
                received[String(record.topic.dropLast("/alert".count)), default: []].append("\(from)>\(to) on \(date)")
            }
            // The one repeat MQTT cannot rule out: admitted only when the killed run's alert
            // reached the broker and its witness did not.
            func inWitnessGap(_ key: String) -> Bool {
                let newPhase = expected[key].flatMap { $0.split(separator: ">").last.map(String.init) }
                return Collector.inWitnessGap(key, phase: newPhase, dataDate: next, in: killedRun)
            }
            var wrong: [String] = []
            var repeated: [String] = []
            for key in Set(received.keys).union(expected.keys).sorted() {
                let wanted = expected[key].map { ["\($0) on \(next)"] } ?? []
                var got = received[key] ?? []
                if got.count == 2, got == wanted + wanted, inWitnessGap(key) {
                    repeated.append(key)
                    got.removeLast()
                }
                if got != wanted { wrong.append("\(key): \(received[key] ?? []), expected \(wanted)") }
            }
            #expect(wrong.isEmpty, "\(wrong.count) of \(expected.count) wrong:\n\(wrong.joined(separator: "\n"))")
            #expect(repeated.count <= 1, "more than one alert in the witness gap of one kill: \(repeated)")
            let resent = logs[1].split(separator: "\n").first { $0.contains("handed over without an acknowledgement") } ?? "none resent"
            print("\(moment.testDescription): \(expected.count) alerts due, repeated in the witness gap: \(repeated); \(resent)")

            // The retained states and phases are the new day's.
            var phases: [String: String] = [:]
            for (topic, payload) in try await scene.retained(["ampel/device/+/state", "ampel/district/+/phase"], count: devices.count + after.count) {
                if topic.hasPrefix("ampel/district/") {
                    phases[String(topic.dropLast("/phase".count))] = payload
                } else {
                    let district = Collector.field("district", payload) as? [String: Any]
                    let date = Collector.field("dataDate", payload) as? String ?? "?"
                    phases[String(topic.dropLast("/state".count))] =
                        "\(Collector.field("phase", payload) as? String ?? "?") in \(district?["ags"] as? String ?? "?") on \(date)"
                }
            }
            for (ags, phase) in after.sorted(by: { $0.key < $1.key }) {
                #expect(phases["ampel/district/\(ags)"] == phase, "district \(ags)")
            }
            for device in devices {
                let wanted = "\(after[device.ags] ?? "?") in \(device.ags) on \(next)"
                #expect(phases["ampel/device/\(device.key)"] == wanted, "device \(device.key)")
            }
            if !wrong.isEmpty { print(logs.joined(separator: "\n=====\n")) }
        }
    }
}
