import AmpelTestSupport
import Foundation
import Synchronization
import Testing

/// One end-to-end scene of `ampel run`: a real mosquitto, a scratch directory (the daemon's
/// state directory is `dir/state`), a ``Collector`` reading what the daemon publishes,
/// optionally a loopback HTTP server, and the daemon currently running on them.
///
/// ``run(_:_:)`` closes it all in reverse order whether the body returns or throws: a test
/// that fails half-way leaves no daemon, `mosquitto_sub`, HTTP server or broker behind.
final class Scene {
    struct Options {
        /// What the collector reads; `ampel/bridge/state` is always added (starts and stops await it).
        var topics = ["ampel/device/#", "ampel/bridge/state", "ampel/bridge/info"]
        /// YAML of the daemon's configuration file, after ``DaemonProcess/replayConfiguration``;
        /// `{http}` in it stands for the base URL of the scene's HTTP server.
        var configuration = ""
        /// Whether the configuration begins with ``DaemonProcess/replayConfiguration``: false only for
        /// a test of `alerts.max_fix_age` itself.
        var replay = true
        /// `--source`; `arcgis` and `rki` with ``http`` read the scene's server (`--url`: its
        /// query endpoint, its district file).
        var source = "snapshot"
        /// `--date`, none when nil.
        var date: String? = "2020-10-15"
        /// Further arguments of `ampel run`.
        var arguments: [String] = []
        /// Whether the scene has a loopback HTTP server (``server``).
        var http = false
        var broker = MosquittoBroker.Options()
    }

    /// Where a fix comes in: `ampel/location/<key>`, `owntracks/<key>` or `traccar/positions`.
    enum Input { case plain, owntracks, traccar }

    let options: Options
    let broker: MosquittoBroker
    /// The scratch directory, removed at the end.
    let dir: URL
    let collector: Collector
    let server: HTTPFixtureServer?
    /// The daemon started last.
    private(set) var daemon: DaemonProcess?
    /// Whether ``server`` still runs: a second shutdown of its event loops never returns.
    private var serving = true
    /// The collector's mark when ``daemon`` was started: its `offline` comes after it.
    private var started = 0
    /// The daemon's `--broker` from its next start on, in place of the scene's broker (a proxy
    /// in front of it); the collector and the publishers stay on the broker itself.
    var brokerURL: String?

    /// The daemon's state directory.
    var state: URL { dir.appendingPathComponent("state") }

    private init(_ options: Options, broker: MosquittoBroker, dir: URL, collector: Collector, server: HTTPFixtureServer?) {
        (self.options, self.broker, self.dir, self.collector, self.server) = (options, broker, dir, collector, server)
    }

    /// Runs `body` in a fresh scene and closes it: the daemon killed and reaped, the collector
    /// stopped, the HTTP server shut down, the broker stopped, the directory removed. When the
    /// body throws, the daemon's standard error is attached to the test.
    static func run<T>(_ options: Options = Options(), _ body: (Scene) async throws -> T) async throws -> T {
        let scene = try await make(options)
        do {
            let result = try await body(scene)
            await scene.close()
            return result
        } catch {
            if let daemon = scene.daemon { Attachment.record(daemon.stderr, named: "ampel-run.stderr.txt") }
            await scene.close()
            throw error
        }
    }

    /// The collector's own topic, to see its subscription live.
    static let probeTopic = "ampel-test/collector-probe"

    private static func make(_ options: Options) async throws -> Scene {
        var undo: [() async -> Void] = []
        do {
            let broker = try await MosquittoBroker.start(options.broker)
            undo.append { broker.stop() }
            let dir = try temporaryDirectory()
            undo.append { try? FileManager.default.removeItem(at: dir) }
            try FileManager.default.createDirectory(at: dir.appendingPathComponent("state"), withIntermediateDirectories: true)
            let server = options.http ? try await HTTPFixtureServer.start() : nil
            if let server { undo.append { try? await server.shutdown() } }
            let topics = options.topics.contains("ampel/bridge/state") ? options.topics : options.topics + ["ampel/bridge/state"]
            // Subscribed before the daemon starts: what it publishes without retaining (the start's
            // lamp commands, alerts) reaches only a live subscription.
            let collector = try Collector(broker, topics: topics + [Self.probeTopic])
            undo.append { collector.stop() }
            try await collector.awaitRoute(from: broker.host, port: broker.port, topic: Self.probeTopic)
            return Scene(options, broker: broker, dir: dir, collector: collector, server: server)
        } catch {
            for step in undo.reversed() { await step() }
            throw error
        }
    }

    private func close() async {
        await daemon?.end()
        collector.stop()
        if let server, serving { try? await server.shutdown() }
        broker.stop()
        try? FileManager.default.removeItem(at: dir)
    }

    /// Shuts the HTTP server down now, so that what it received is complete; ``run(_:_:)``
    /// then leaves it.
    func shutdownServer() async throws {
        guard let server, serving else { return }
        serving = false
        try await server.shutdown()
    }

    /// The arguments of `ampel run` (its `--config` comes from ``DaemonProcess``).
    var arguments: [String] {
        var arguments = ["--broker", brokerURL ?? broker.url, "--state-dir", state.path, "--source", options.source]
        if let date = options.date { arguments += ["--date", date] }
        if let server, !options.arguments.contains("--url") {
            if options.source == "arcgis" { arguments += ["--url", server.queryURL] }
            if options.source == "rki" { arguments += ["--url", server.fileURL] }
        }
        return arguments + ["--log-level", "info"] + options.arguments
    }

    /// Starts the daemon and waits until it says `online` (and, by default, until it has
    /// subscribed: from then on its SIGTERM handling is in place and it reads every fix).
    /// - Parameter configuration: this start's YAML instead of the options' (`{http}` as there).
    @discardableResult
    func start(environment: [String: String] = [:], configuration: String? = nil, awaitSubscribed: Bool = true) async throws -> DaemonProcess {
        if let daemon {
            try #require(!daemon.process.isRunning, "a daemon runs already")
            await daemon.end()
        }
        let mark = collector.mark
        var yaml = (options.replay ? DaemonProcess.replayConfiguration : "") + (configuration ?? options.configuration)
        if let server { yaml = yaml.replacingOccurrences(of: "{http}", with: server.baseURL) }
        let daemon = try DaemonProcess(arguments, environment: environment, configuration: yaml, command: "run")
        self.daemon = daemon
        started = mark
        try await collector.wait("ampel run online", since: mark) { records in
            records.contains { $0.topic == "ampel/bridge/state" && $0.payload.contains("online") }
        }
        if awaitSubscribed { try await daemon.awaitLog("subscribed") }
        return daemon
    }

    /// SIGTERM, its end and its `offline` (after everything it sent); a clean stop exits 0.
    @discardableResult
    func stop() async throws -> ChildProcess.Status {
        let daemon = try #require(daemon, "no daemon started")
        let status = try await daemon.stop()
        #expect(status.exitCode == 0, "\(status)\n\(daemon.stderr)")
        try await collector.awaitOffline(since: started)
        return status
    }

    /// SIGKILL (unless it died already), its end and the broker's Last Will, which follows
    /// everything the broker took from it.
    @discardableResult
    func kill() async throws -> ChildProcess.Status {
        let daemon = try #require(daemon, "no daemon started")
        let status = try await daemon.kill()
        #expect(status.signal == SIGKILL, "\(status)\n\(daemon.stderr)")
        try await collector.awaitOffline(since: started)
        return status
    }

    /// Until the daemon has killed itself (its crash hook, `AMPEL_TEST_CRASH_AFTER_ALERTS`) and
    /// the broker has published its Last Will. Not ``kill()``: a daemon behind the broker's
    /// acknowledgements would be killed at another moment than the one under test.
    @discardableResult
    func awaitCrash() async throws -> ChildProcess.Status {
        let daemon = try #require(daemon, "no daemon started")
        let status = try await daemon.exit()
        #expect(status.signal == SIGKILL, "the daemon was to kill itself: \(status)\n\(daemon.stderr)")
        try await collector.awaitOffline(since: started)
        return status
    }

    /// One QoS 1 fix, acknowledged by the broker when this returns.
    func fix(_ key: String, at place: (Double, Double), tst: Int, acc: Int? = nil, lang: String? = nil, input: Input = .plain) async throws {
        try await Self.publish(broker, [Self.message(key, at: place, tst: tst, acc: acc, lang: lang, input: input)])
    }

    /// One QoS 1 fix for each key at `place`, 20 publishers at a time.
    func round(keys: [String], at place: (Double, Double), tst: Int, input: Input = .plain) async throws {
        try await Self.publish(broker, keys.map { Self.message($0, at: place, tst: tst, input: input) })
    }

    /// The retained `bridge/info`.
    func retainedInfo() async throws -> [String: Any] {
        let info = try await MosquittoBroker.runTool(
            "/usr/bin/mosquitto_sub", ["-h", broker.host, "-p", "\(broker.port)", "-t", "ampel/bridge/info", "-C", "1", "-W", "30"])
        return try #require(try JSONSerialization.jsonObject(with: Data(info.utf8)) as? [String: Any], "bridge/info: \(info)")
    }

    /// The first `count` retained messages under `filters`, as the broker holds them now.
    func retained(_ filters: [String], count: Int, timeout seconds: Int = 30) async throws -> [Collector.Record] {
        let output = try await MosquittoBroker.runTool("/usr/bin/mosquitto_sub", [
            "-h", broker.host, "-p", "\(broker.port)", "-v", "--retained-only", "-C", "\(count)", "-W", "\(seconds)",
        ] + filters.flatMap { ["-t", $0] })
        return Self.records(verbose: output)
    }

    /// The topic and payload of each line `mosquitto_sub -v` printed.
    static func records(verbose output: String) -> [Collector.Record] {
        var records: [Collector.Record] = []
        for line in output.split(separator: "\n") {
            guard let space = line.firstIndex(of: " ") else { continue }
            records.append((String(line[..<space]), String(line[line.index(after: space)...])))
        }
        return records
    }

    /// The topic and payload of a fix on `input`.
    static func message(_ key: String, at place: (Double, Double), tst: Int, acc: Int? = nil, lang: String? = nil,
                        input: Input = .plain) -> (topic: String, payload: String) {
        var fields = [#""lat":\#(place.0)"#, #""lon":\#(place.1)"#, #""tst":\#(tst)"#]
        if let acc { fields.append(#""acc":\#(acc)"#) }
        if let lang { fields.append(#""lang":"\#(lang)""#) }
        switch input {
        case .plain:
            return ("ampel/location/\(key)", "{" + fields.joined(separator: ",") + "}")
        case .owntracks:
            return ("owntracks/\(key)", #"{"_type":"location","# + fields.joined(separator: ",") + "}")
        case .traccar:
            let position = #"{"latitude":\#(place.0),"longitude":\#(place.1),"fixTime":\#(tst * 1000)}"#
            return ("traccar/positions", #"{"position":\#(position),"device":{"uniqueId":"\#(key)","name":"\#(key)"}}"#)
        }
    }

    /// Publishes each message with QoS 1 through `mosquitto_pub`, 20 at a time; every one is
    /// acknowledged by the broker when this returns.
    static func publish(_ broker: MosquittoBroker, _ messages: [(topic: String, payload: String)]) async throws {
        try await publish(host: broker.host, port: broker.port, messages)
    }

    /// ``publish(_:_:)`` to any MQTT broker: `options` go to `mosquitto_pub` (`-V mqttv311` for nats-server);
    /// `checked: false` lets publishers fail (a broker that is down on purpose). Returns how many failed.
    @discardableResult
    static func publish(host: String, port: Int, options: [String] = [], _ messages: [(topic: String, payload: String)],
                        checked: Bool = true) async throws -> Int {
        // One shell script per 500 publishers: a longer one passes the kernel's argument limit.
        guard messages.count <= 500 else {
            var failed = 0
            for start in stride(from: 0, to: messages.count, by: 500) {
                failed += try await publish(host: host, port: port, options: options, Array(messages[start..<min(start + 500, messages.count)]),
                                            checked: checked)
            }
            return failed
        }
        func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'" }
        var script = ""
        for (index, message) in messages.enumerated() {
            script += "/usr/bin/mosquitto_pub \(options.joined(separator: " ")) -h \(host) -p \(port) -q 1 -t \(quoted(message.topic)) -m \(quoted(message.payload)) &\n"
            if index % 20 == 19 { script += "wait\n" }
        }
        // `wait` alone does not return a failed publisher's status: count them.
        script = script.replacingOccurrences(of: " &\n", with: " || echo mosquitto_pub failed &\n") + "wait\n"
        let output = try await MosquittoBroker.runTool("/bin/sh", ["-c", script])
        if checked { try #require(!output.contains("mosquitto_pub failed"), "\(output)") }
        return output.components(separatedBy: "mosquitto_pub failed").count - 1
    }
}

extension Scene {
    /// Checks a stop against its limits (docs/DESIGN.md, decision 45), each step on the daemon's
    /// own clock (its `stopped` line in `stderr`): handling 2 s, the snapshot by then or 0.5 s
    /// after, the goodbye 3 s, the broker's close 1 s; 500 ms each for a timer that fires late on
    /// a loaded machine (a step that ignored its limit would wait for seconds). `took`, from the
    /// signal to the reaped process, within systemd's `TimeoutStopSec` (20 s,
    /// deploy/systemd/ampel.service): a wall-clock bound of 6.5 s failed on CI's loaded machine
    /// around steps of 1-4 s. (CI's parallel suites once stretched it to 6-12 s: the idle-class
    /// state writer, asleep, had to get the CPU to end before the process could be reaped;
    /// StateSaver now ends it when its work is done.)
    /// - Parameter webhooks: the daemon has webhooks, whose drain (2 s from the end of the
    ///   handling, beside the snapshot and the goodbye) the close waits for.
    static func expectStopWithinLimits(_ stderr: String, took: Duration, webhooks: Bool = false,
                                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        let stopped = try #require(stderr.split(separator: "\n").last { $0.hasSuffix("[AmpelDaemon] stopped") },
                                   "no stopped line", sourceLocation: sourceLocation)
        func step(_ name: String) throws -> Int {
            let field = try #require(stopped.range(of: " \(name)=").map { stopped[$0.upperBound...] }, "\(name) in \(stopped)",
                                     sourceLocation: sourceLocation)
            return try #require(Int(field.prefix { $0.isNumber }), "\(name) in \(stopped)", sourceLocation: sourceLocation)
        }
        let why = "\(stopped)\n\(stderr.split(separator: "\n").filter { !$0.contains(" info ") }.suffix(20).joined(separator: "\n"))"
        #expect(try step("handling") + step("snapshot") <= 3_000, "handling and snapshot over 2.5 s (+0.5 s for a late timer): \(why)", sourceLocation: sourceLocation)
        #expect(try step("goodbye") <= 3_500, "the goodbye over 3 s (+0.5 s for a late timer): \(why)", sourceLocation: sourceLocation)
        let drainLeft = webhooks ? max(0, 2_000 - (try step("snapshot")) - (try step("goodbye"))) : 0
        #expect(try step("disconnect") <= drainLeft + 1_500, "the broker's close over 1 s (+0.5 s for a late timer, and the webhook drain): \(why)", sourceLocation: sourceLocation)
        #expect(took < .seconds(20), "the stop took \(took) from the signal to the exit: \(why)", sourceLocation: sourceLocation)
    }
}

extension Scene {
    /// Every record of the topics it reads, with each device's newest `tst` and the `offline`s
    /// of the bridge, read by `mosquitto_sub` (a process of its own that outlives the daemon's
    /// restarts).
    final class Collector: Sendable {
        typealias Record = (topic: String, payload: String)
        struct Seen: Sendable {
            var records: [Record] = []
            /// The newest `tst` of each device's state.
            var latest: [String: Int] = [:]
            var offline = 0
        }

        let process: ChildProcess
        private let seen = Watched(Seen())

        /// - Parameter topics: the filters to read (alerts, device states and the bridge state by default).
        convenience init(_ broker: MosquittoBroker, topics: [String] = ["ampel/device/#", "ampel/bridge/state"]) throws {
            try self.init(host: broker.host, port: broker.port, topics: topics)
        }

        /// A collector on any MQTT broker; `options` go to `mosquitto_sub` (`-V mqttv311` for nats-server).
        init(host: String, port: Int, options: [String] = [], topics: [String] = ["ampel/device/#", "ampel/bridge/state"]) throws {
            let seen = self.seen
            let buffer = Mutex("")
            process = try ChildProcess(
                "/usr/bin/mosquitto_sub",
                ["-h", host, "-p", "\(port)", "-q", "1", "-v"] + options + topics.flatMap { ["-t", $0] },
                output: .read { data in
                    let lines: [Substring] = buffer.withLock { buffer in
                        buffer += String(decoding: data, as: UTF8.self)
                        guard let end = buffer.lastIndex(of: "\n") else { return [] }
                        defer { buffer.removeSubrange(...end) }
                        return buffer[..<end].split(separator: "\n")
                    }
                    guard !lines.isEmpty else { return }
                    seen.update { seen in
                        for line in lines {
                            guard let space = line.firstIndex(of: " ") else { continue }
                            let record = (String(line[..<space]), String(line[line.index(after: space)...]))
                            seen.records.append(record)
                            if record.0.hasSuffix("/bridge/state"), record.1.contains("offline") { seen.offline += 1 }
                            if record.0.hasSuffix("/state"), let tst = Self.field("tst", record.1) as? Int {
                                let key = Self.key(record.0, suffix: "/state")
                                seen.latest[key] = max(seen.latest[key] ?? 0, tst)
                            }
                        }
                    }
                }, errors: .discard, onExit: { _ in })
        }

        static func key(_ topic: String, suffix: String) -> String {
            String(topic.dropFirst("ampel/device/".count).dropLast(suffix.count))
        }

        static func field(_ name: String, _ payload: String) -> Any? {
            (try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])?[name]
        }

        /// The `from`>`to` of every alert, per device key.
        func alerts() -> [String: [String]] {
            var result: [String: [String]] = [:]
            for record in seen.value.records where record.topic.hasSuffix("/alert") {
                let from = Self.field("from", record.payload) as? String ?? "null"
                let to = Self.field("to", record.payload).flatMap { ($0 as? [String: Any])?["phase"] as? String ?? $0 as? String } ?? "?"
                result[Self.key(record.topic, suffix: "/alert"), default: []].append("\(from)>\(to)")
            }
            return result
        }

        /// How many records arrived so far: a mark for ``records(since:)`` and ``wait(_:since:timeout:until:)``.
        var mark: Int { seen.value.records.count }

        func records(since mark: Int = 0) -> [Record] {
            let records = seen.value.records
            return Array(records[min(mark, records.count)...])
        }

        /// Until `test` holds for the records that arrived since `mark`.
        func wait(_ what: String, since mark: Int = 0, timeout: Duration = .seconds(60),
                  until test: @escaping @Sendable (ArraySlice<Record>) -> Bool) async throws {
            let seen = self.seen
            try await withTimeout(timeout, what) {
                await seen.wait { test($0.records[min(mark, $0.records.count)...]) }
            }
        }

        /// Until a message published on `host`:`port` under `topic` (one the collector reads)
        /// arrives: the collector is subscribed and, on a cluster, its interest has reached that
        /// node (nats-server spreads it to the other nodes after the SUBACK). Sends one
        /// non-retained probe per half second until then.
        func awaitRoute(from host: String, port: Int, options: [String] = [], topic: String) async throws {
            let probe = "route-probe-\(UUID().uuidString)"
            let sender = Task {
                while !Task.isCancelled {
                    _ = try? await MosquittoBroker.runTool(
                        "/usr/bin/mosquitto_pub", options + ["-h", host, "-p", "\(port)", "-q", "1", "-t", topic, "-m", probe])
                    await threadSleep(for: .milliseconds(500))
                }
            }
            defer { sender.cancel() }
            try await wait("a probe from \(host):\(port) on \(topic)") { $0.contains { $0.topic == topic && $0.payload == probe } }
        }

        /// Until a bridge state arrives: the subscription is live.
        func awaitBridge() async throws {
            try await wait("a bridge state") { $0.contains { $0.topic.hasSuffix("/bridge/state") } }
        }

        /// The newest `tst` seen in each device's state.
        var latest: [String: Int] { seen.value.latest }

        /// Until every device's latest state has `tst`.
        func awaitStates(_ keys: [String], tst: Int) async throws {
            try await withTimeout(.seconds(60), "every device state at tst \(tst)") { await self.statesReached(keys, tst: tst) }
        }

        /// ``awaitStates(_:tst:)`` without a limit, ended by cancelling the task (a pacer).
        func statesReached(_ keys: [String], tst: Int) async {
            await seen.wait { seen in keys.allSatisfy { (seen.latest[$0] ?? 0) >= tst } }
        }

        /// Stops `daemon` with SIGTERM and waits for its `offline`: the broker forwards one
        /// connection's messages in order, so every alert the daemon sent has arrived here too.
        func stop(_ daemon: DaemonProcess) async throws -> ChildProcess.Status {
            let before = seen.value.offline
            let status = try await daemon.stop()
            let seen = self.seen
            try await withTimeout(.seconds(30), "the daemon's offline") { await seen.wait { $0.offline > before } }
            return status
        }

        func stop() { process.signal(SIGTERM) }

        /// Until a bridge state `offline` arrived since `mark`: after a SIGKILL the broker's Last
        /// Will, published after everything it took from the killed run.
        func awaitOffline(since mark: Int) async throws {
            try await wait("the daemon's offline", since: mark, timeout: .seconds(30)) { records in
                records.contains { $0.topic == "ampel/bridge/state" && $0.payload.contains("offline") }
            }
        }

        /// Whether an alert of `key` (a topic prefix: `ampel/device/<key>` or
        /// `ampel/district/<ags>`) into `phase` lies in the witness gap of a killed run, whose
        /// records are `killedRun`: the run handed the alert over and died before its witness (the
        /// retained state, or the district's phase, published after it), so the restart cannot know
        /// the broker took it and sends it again (docs/topics.md, "Alerts across crashes"). Each
        /// alert's witness goes out before the next alert: one kill leaves at most one alert there.
        /// - Parameter dataDate: the data the witnessing state must carry, when it matters.
        static func inWitnessGap(_ key: String, phase: String?, dataDate: String? = nil, in killedRun: [Record]) -> Bool {
            let alerted = killedRun.contains { record in
                guard record.topic == key + "/alert" else { return false }
                let to = field("to", record.payload)
                return (to as? String ?? (to as? [String: Any])?["phase"] as? String) == phase
            }
            guard alerted else { return false }
            return !killedRun.contains { record in
                if key.hasPrefix("ampel/district/") { return record.topic == key + "/phase" && record.payload == phase }
                return record.topic == key + "/state" && field("phase", record.payload) as? String == phase
                    && (dataDate == nil || field("dataDate", record.payload) as? String == dataDate)
            }
        }
    }
}
