import AmpelMessages
import AmpelMQTT
import AmpelTestSupport
import Foundation
import Synchronization
import Testing

/// `ampel run` stopped with SIGTERM while QoS 1 locations stream in, and started again while
/// they still do, against a real mosquitto: every fix the broker acknowledged is handled once,
/// by one run or the other (docs/deploy.md, "State and crashes"; docs/topics.md).
@Suite("ampel run stopped with SIGTERM under QoS 1 load loses no location (built binary, real mosquitto)", .serialized)
struct RunStopUnderLoadTests {
    /// One client publishing QoS 1 OwnTracks fixes in rounds, one fix per device and round, at
    /// a steady pace, at most two rounds ahead of the broker's acknowledgements and never past
    /// the round it is allowed (``allow(through:)``), until told which round is the last.
    final class Stream: Sendable {
        struct Progress: Sendable {
            var round = 0
            var acknowledged = 0
            var failures: [String] = []
            var last: Int?
            var done = false
            /// The last round it may publish.
            var allowed: Int
        }

        let devices: Int
        let client: MQTTClient
        private let progress: Watched<Progress>

        init(_ broker: MosquittoBroker, devices: Int, allowed: Int) async throws {
            self.devices = devices
            progress = Watched(Progress(allowed: allowed))
            client = MQTTClient(configuration: MQTTConfiguration(host: broker.host, port: broker.port, clientID: "load-\(UUID().uuidString.prefix(8))"))
            try await client.connect()
        }

        static func topic(_ device: Int) -> String { "owntracks/load/d\(device)" }

        var value: Progress { progress.value }

        /// Publishes round 1, 2, … (every `interval`) until the round set by ``finish(after:)``.
        /// - Parameter fix: the payload of a device's fix in a round.
        func run(every interval: Duration, fix: @escaping @Sendable (_ round: Int) -> String) async throws {
            let progress = self.progress
            let start = ContinuousClock.now
            var round = 0
            while round < (progress.value.last ?? .max) {
                round += 1
                let next = round
                try await withTimeout(.seconds(60), "round \(round) allowed") {
                    await progress.wait { $0.allowed >= next }
                }
                let payload = Array(fix(round).utf8)
                for device in 0..<devices {
                    try client.enqueue(topic: Self.topic(device), payload: payload, qos: .atLeastOnce) { error in
                        progress.update { progress in
                            progress.acknowledged += 1
                            if let error { progress.failures.append("\(error)") }
                        }
                    }
                }
                progress.update { $0.round = round }
                let due = start + interval * round
                if due > .now { await threadSleep(for: due - .now) }
                let enough = (round - 1) * devices
                try await withTimeout(.seconds(30), "the broker's acknowledgements of round \(round - 1)") {
                    await progress.wait { $0.acknowledged >= enough }
                }
            }
            let all = round * devices
            try await withTimeout(.seconds(30), "the broker's acknowledgements of every round") {
                await progress.wait { $0.acknowledged >= all }
            }
            progress.update { $0.done = true }
        }

        /// Lets the stream go on through `round` (it never takes one back).
        func allow(through round: Int) {
            progress.update { $0.allowed = max($0.allowed, round) }
        }

        /// Ends the stream `more` rounds after the current one.
        func finish(after more: Int) {
            progress.update { $0.last = $0.round + more }
        }

        /// Until the broker has acknowledged `count` fixes or the stream is done.
        func awaitAcknowledged(_ count: Int) async throws {
            let progress = self.progress
            do {
                try await withTimeout(.seconds(60), "\(count) fixes acknowledged") {
                    await progress.wait { $0.acknowledged >= count || $0.done }
                }
            } catch {
                // Where the stream stood says whether the broker or the stream stopped.
                throw TestTimeout(description: "\(error); the stream at \(progress.value), its client \(client.unanswered) publishes unanswered, on \(client.connectedBroker.map { "\($0)" } ?? "no broker")")
            }
        }

        func close() async { await client.disconnect() }
    }

    @Test("SIGTERM while 200 devices stream QoS 1 fixes, a restart while they go on: each fix handled once, the last one retained, the stop quick and clean")
    func stopUnderLoad() async throws {
        let day = "2020-10-15"
        let phases = try rawBavarianIncidences(day: day).mapValues(expectedPhase)
        // Two districts in different phases: every handled fix changes its device's phase, so
        // each one is seen (an alert and a state).
        let places: [(ags: String, place: (Double, Double))] = [("09162", RunCrashTests.muenchen), ("09171", RunCrashTests.altoetting)]
        let phase = try places.map { try #require(phases[$0.ags]) }
        try #require(phase[0] != phase[1], "the two places must differ in phase on \(day)")
        @Sendable func place(_ round: Int) -> (Double, Double) { places[round % 2].place }
        let base = 1_700_000_000

        // The verbose broker writes a log line per packet: slower, it meets a closed socket more
        // often (3 of 6 runs handled fixes twice before the goodbye half-closed, 0 of 11 since).
        var options = Scene.Options()
        (options.broker, options.date) = (.init(verboseLog: true), day)
        // OwnTracks keys have two levels (`load/d7`): `ampel/device/load/d7/state`.
        try await Scene.run(options) { scene in
            let (broker, collector) = (scene.broker, scene.collector)
            let devices = 200
            let keys = (0..<devices).map { "load/d\($0)" }
            var daemon = try await scene.start()

            // The stream runs at most `window` rounds (4,000 fixes) ahead of the states the daemon
            // has published: load for its stop, but not more than a loaded machine can work off.
            // (Open-ended at 8,000 fixes/s, a CI machine with the other suites in parallel once
            // fell 500 rounds behind before the stop and had 150,000 fixes to work off after it.)
            let window = 20
            let stream = try await Stream(broker, devices: devices, allowed: window)
            let pacer = Task {
                while !Task.isCancelled {
                    let latest = collector.latest
                    let handled = keys.map { (latest[$0] ?? base) - base }.min() ?? 0
                    stream.allow(through: handled + window)
                    await collector.statesReached(keys, tst: base + handled + 1)
                }
            }
            defer { pacer.cancel() }
            let streaming = Task {
                try await stream.run(every: .milliseconds(25)) { round in
                    let (lat, lon) = place(round)
                    return #"{"_type":"location","lat":\#(lat),"lon":\#(lon),"tst":\#(base + round),"tid":"LD"}"#
                }
            }
            // A test that fails half-way ends the stream too.
            defer { stream.finish(after: 0) }
            // Mid-stream: every device has had a few fixes handled.
            try await collector.awaitStates(keys, tst: base + 5)
            let signalled = ContinuousClock.now
            try await scene.stop()
            let stopTook = (daemon.exitedAt ?? .now) - signalled
            try Scene.expectStopWithinLimits(daemon.stderr, took: stopTook)
            var logs = [daemon.stderr]

            // The stream goes on while the daemon is down, ten rounds: the broker keeps them for its session.
            stream.allow(through: stream.value.round + 10)
            let whenDown = stream.value.acknowledged
            try await stream.awaitAcknowledged(whenDown + 10 * devices)
            let sentWhileDown = stream.value.acknowledged - whenDown
            let secondRun = collector.mark
            daemon = try await scene.start()
            stream.finish(after: 10)
            try await streaming.value
            let rounds = stream.value.round
            #expect(stream.value.failures.isEmpty, "\(stream.value.failures.prefix(5))")
            do {
                try await collector.awaitStates(keys, tst: base + rounds)
            } catch {
                let behind = keys.filter { (collector.latest[$0] ?? 0) < base + rounds }
                Issue.record("""
                    \(error): \(behind.count) devices behind, e.g. \(behind.prefix(5).map { "\($0) at \((collector.latest[$0] ?? 0) - base)" }); \
                    stream \(stream.value)
                    \(logs[0])
                    =====
                    \(daemon.stderr)
                    """)
                throw error
            }
            try await scene.stop()
            logs.append(daemon.stderr)
            await stream.close()

            // Each run's last bridge/info: the one of its goodbye.
            let records = collector.records()
            // A clean stop says offline once. A second is the Last Will: the broker did not get the
            // DISCONNECT. It then delivers the messages whose PUBACK it had not read again to the next
            // start, which has them in its journal: fixes handled twice (docs/DESIGN.md, decision 46:
            // a close with unread bytes resets the connection; the verbose broker makes it likelier).
            let offline = records[..<secondRun].filter { $0.topic == "ampel/bridge/state" && $0.payload.contains("offline") }.count
            let steps = logs[0].split(separator: "\n").filter { $0.contains("] stopped") || $0.contains("could not publish offline") }
            #expect(offline == 1, "the first run said offline \(offline) times: \(steps)")
            let finalInfo = try [records[..<secondRun], records[secondRun...]].map { run in
                let info = try #require(run.last { $0.topic == "ampel/bridge/info" }, "a bridge/info of each run")
                return try #require(try JSONSerialization.jsonObject(with: Data(info.payload.utf8)) as? [String: Any])
            }
            let counters = finalInfo.map { $0["counters"] as? [String: Any] ?? [:] }
            let accepted = counters.map { ($0["accepted"] as? [String: Any])?["owntracks"] as? Int ?? 0 }
            let alerts = counters.map { $0["alerts"] as? Int ?? 0 }
            // Counters start at zero with each run: the two add up to every fix sent, none lost, none twice.
            #expect(accepted.reduce(0, +) >= devices * rounds, "accepted \(accepted) of \(devices) x \(rounds) sent: fixes lost")
            #expect(accepted.reduce(0, +) == devices * rounds, "accepted \(accepted) of \(devices) x \(rounds) sent")
            #expect(alerts.reduce(0, +) == devices * rounds, "alerts \(alerts) of \(devices) x \(rounds) fixes, each a phase change")
            for counter in counters {
                #expect((counter["dropped"] as? [String: Any] ?? [:]).isEmpty, "\(counter)")
            }

            // Every alert, once and in order, across the stop.
            var chain = ["null>\(phase[1])"]
            for round in 2...max(2, rounds) { chain.append("\(phase[(round - 1) % 2])>\(phase[round % 2])") }
            let received = collector.alerts()
            // None lost or out of order, none repeated.
            let missing = keys.filter { key in
                var expected = Array(chain.prefix(rounds))[...]
                for alert in received[key] ?? [] where alert == expected.first { expected.removeFirst() }
                return !expected.isEmpty
            }
            #expect(missing.isEmpty, "\(missing.count) devices missing alerts, e.g. \(missing.first.map { "\($0): \(received[$0] ?? [])" } ?? "")")
            let wrong = keys.filter { received[$0] ?? [] != Array(chain.prefix(rounds)) }
            #expect(wrong.isEmpty, "\(wrong.count) devices with other alerts, e.g. \(wrong.first.map { "\($0): \(received[$0]?.count ?? 0) alerts" } ?? "")")

            // The retained state of each device is its last fix: its time and its position.
            var states: [String: String] = [:]
            for (topic, payload) in try await scene.retained(["ampel/device/+/+/state"], count: devices) {
                let fields = ["tst", "lat", "lon", "phase"].map { "\(RunCrashTests.Collector.field($0, payload) ?? "nil")" }
                states[RunCrashTests.Collector.key(topic, suffix: "/state")] = fields.joined(separator: " ")
            }
            let (lat, lon) = place(rounds)
            let wanted = "\(base + rounds) \(lat) \(lon) \(phase[rounds % 2])"
            let stale = keys.filter { states[$0] != wanted }
            #expect(stale.isEmpty, "\(stale.count) devices not at their last fix (\(wanted)), e.g. \(stale.first.map { "\($0): \(states[$0] ?? "none")" } ?? "")")

            // A goodbye the broker did not acknowledge in time ends without DISCONNECT (the Last Will says offline).
            let goodbye = logs[0].contains("could not publish offline state") ? "goodbye NOT acknowledged" : "goodbye acknowledged"
            let notHandled = logs[0].split(separator: "\n").first { $0.contains("stopping with messages not handled") }
            let replayed = logs[1].split(separator: "\n").first { $0.contains("journal replayed") }
            let stepLine = logs[0].split(separator: "\n").first { $0.contains("goodbye=") }
            print("""
                SIGTERM under load: \(devices) devices x \(rounds) rounds; the stop took \(stopTook), \(goodbye); \(sentWhileDown) fixes sent while down; \
                accepted \(accepted); \(notHandled.map(String.init) ?? "every taken message handled before the stop"); \(replayed.map(String.init) ?? "no journal replay"); \(stepLine.map(String.init) ?? "")
                """)
        }
    }

    @Test("a restart with more locations waiting for its session than its intake holds comes online and handles them all")
    func restartWithBacklog() async throws {
        var options = Scene.Options()
        options.topics = ["ampel/bridge/state", "ampel/bridge/info"]
        try await Scene.run(options) { scene in
            let (broker, dir, collector) = (scene.broker, scene.dir, scene.collector)
            try await scene.start()
            try await scene.stop()

            // More than the daemon's intake limit (20,000 waiting messages, IntakeGate) is queued for
            // its session while it is down: the start reads past them to the answers it waits for.
            let count = 25_000
            let (lat, lon) = RunCrashTests.muenchen
            let lines = (1...count).map { #"{"_type":"location","lat":\#(lat),"lon":\#(lon),"tst":\#(1_700_000_000 + $0)}"# }
            let file = dir.appendingPathComponent("backlog.txt")
            try (lines.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
            try await MosquittoBroker.runTool("/bin/sh", [
                "-c", "/usr/bin/mosquitto_pub -h \(broker.host) -p \(broker.port) -q 1 -t owntracks/backlog/phone -l < \(file.path)",
            ])

            let restart = collector.mark
            try await scene.start()
            try await collector.wait("all \(count) fixes accepted", since: restart) { records in
                records.contains { $0.topic == "ampel/bridge/info" && $0.payload.contains(#""accepted":{"owntracks":\#(count)}"#) }
            }
            try await scene.stop()
        }
    }
}
