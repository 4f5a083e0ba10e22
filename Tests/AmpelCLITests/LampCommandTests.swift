import AmpelTestSupport
import Foundation
import Testing

/// `ampel lamp --json` as a built binary against a real Mosquitto: every published message
/// either produces exactly the expected pattern line or none at all.
///
/// Lines are awaited (each with a deadline), never slept for. Messages go out through
/// `mosquitto_pub -q 1`, one process after the other, so the broker delivers them to the
/// lamp in publication order: a garbage message that wrongly produced a line would show up
/// in place of the next expected one.
@Suite(.serialized) struct LampCommandTests {
    @Test func jsonLinesFollowPhasesBridgeStateAndIgnoreGarbage() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let pub = Publisher(port: broker.port)

        // Retained, as the daemon publishes them: the lamp gets them when it subscribes.
        try await pub.send("ampel/bridge/state", #"{"state":"online"}"#, retain: true)
        try await pub.send("ampel/district/09162/phase", "red", retain: true)

        let lamp = try LampProcess.start(["lamp", "--json", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--district", "09162"])
        defer { lamp.terminate() }

        try await lamp.expect(#"{"pattern":"nosignal","reason":"waiting","leds":["blue"],"blink":true,"periodMs":2000}"#)
        try await lamp.expect(#"{"pattern":"red","reason":null,"leds":["red"],"blink":false,"periodMs":0}"#)

        try await pub.send("ampel/district/09162/phase", "darkred", retain: true)
        try await lamp.expect(#"{"pattern":"darkred","reason":null,"leds":["red"],"blink":true,"periodMs":1000}"#)

        // Garbage on every topic the lamp reads, and a valid phase for another district.
        for junk in ["purple", "Red", "", #"{"phase":"green"}"#, "green!", "dark red"] {
            try await pub.send("ampel/district/09162/phase", junk)
        }
        var seed: UInt32 = 0x2020_1022  // a fixed LCG: the same "random" bytes on every run
        for _ in 0..<3 {
            let junk = (0..<64).map { _ -> UInt8 in
                seed = seed &* 1_664_525 &+ 1_013_904_223
                return UInt8(truncatingIfNeeded: seed >> 24)
            }
            try await pub.send("ampel/district/09162/phase", bytes: junk)
        }
        try await pub.send("ampel/district/09162/state", #"{"stale":"yes"}"#)
        try await pub.send("ampel/district/09162/state", #"{"stale":true"#)
        try await pub.send("ampel/bridge/state", #"{"state":"offline""#)
        try await pub.send("ampel/bridge/state", #"{"x":{"state":"offline"}}"#)
        try await pub.send("ampel/district/09163/phase", "green")
        try await pub.send("ampel/district/09162/phase", "green", retain: true)
        try await lamp.expect(#"{"pattern":"green","reason":null,"leds":["green"],"blink":false,"periodMs":0}"#)

        try await pub.send("ampel/district/09162/state", #"{"district":{"ags":"09162"},"phase":"green","stale":true}"#, retain: true)
        try await lamp.expect(#"{"pattern":"nosignal","reason":"stale","leds":["blue"],"blink":true,"periodMs":2000}"#)
        try await pub.send("ampel/district/09162/state", #"{"phase":"green","stale":false}"#, retain: true)
        try await lamp.expect(#"{"pattern":"green","reason":null,"leds":["green"],"blink":false,"periodMs":0}"#)

        // The daemon's Last Will: offline hides the phase; a change while offline shows after.
        try await pub.send("ampel/bridge/state", #"{"state":"offline"}"#, retain: true)
        try await lamp.expect(#"{"pattern":"nosignal","reason":"offline","leds":["blue"],"blink":true,"periodMs":2000}"#)
        try await pub.send("ampel/district/09162/phase", "yellow", retain: true)
        try await pub.send("ampel/bridge/state", #"{"state":"online"}"#, retain: true)
        try await lamp.expect(#"{"pattern":"yellow","reason":null,"leds":["yellow"],"blink":false,"periodMs":0}"#)

        try await pub.send("ampel/district/09162/phase", "outside", retain: true)
        try await lamp.expect(#"{"pattern":"outside","reason":null,"leds":["blue"],"blink":false,"periodMs":0}"#)

        // The lamp's own connection: the broker goes away, the lamp says offline.
        await broker.kill()
        try await lamp.expect(#"{"pattern":"nosignal","reason":"offline","leds":["blue"],"blink":true,"periodMs":2000}"#)

        // SIGTERM: a clean exit with no further line.
        let status = try await lamp.terminateAndWait()
        #expect(status == 0)
        #expect(lamp.remainingLines().isEmpty)
    }

    @Test func deviceLampReadsTheSignalObject() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let pub = Publisher(port: broker.port)
        try await pub.send("ampel/device/alice/phone/state", ##"{"district":{"ags":"09162","name":"München","state":"Bayern"},"phase":"darkred","color":"#8B0000","rules":["{\"phase\":\"green\"}"],"stale":false}"##, retain: true)

        let lamp = try LampProcess.start(["lamp", "--json", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--device", "alice/phone"])
        defer { lamp.terminate() }
        try await lamp.expect(#"{"pattern":"nosignal","reason":"waiting","leds":["blue"],"blink":true,"periodMs":2000}"#)
        try await lamp.expect(#"{"pattern":"darkred","reason":null,"leds":["red"],"blink":true,"periodMs":1000}"#)
        try await pub.send("ampel/device/alice/phone/state", #"{"phase":"green","district":{"phase":"red"}}"#, retain: true)
        try await lamp.expect(#"{"pattern":"green","reason":null,"leds":["green"],"blink":false,"periodMs":0}"#)
        try await pub.send("ampel/device/alice/phone/state", #"{"phase":"red","stale":true}"#, retain: true)
        try await lamp.expect(#"{"pattern":"nosignal","reason":"stale","leds":["blue"],"blink":true,"periodMs":2000}"#)
        let status = try await lamp.terminateAndWait()
        #expect(status == 0)
    }

    /// The lamp on what `ampel run` publishes by default (`on_change`, texts in their own
    /// topics): a device state without its texts is still a whole signal for the lamp.
    @Test func deviceLampFollowsTheDaemonsLeanState() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withDaemon([
            "--broker", broker.url, "--state-dir", dir.path, "--source", "snapshot", "--date", "2020-10-15", "--log-level", "info",
        ]) { daemon in
            try await daemon.awaitLog("subscribed")
            let lamp = try LampProcess.start(["lamp", "--json", "--broker", broker.url, "--device", "bob"])
            defer { lamp.terminate() }
            try await lamp.expect(#"{"pattern":"nosignal","reason":"waiting","leds":["blue"],"blink":true,"periodMs":2000}"#)
            try await RunCrashTests.send(broker, [("bob", RunCrashTests.muenchen)], tst: 100)
            try await lamp.expect(#"{"pattern":"red","reason":null,"leds":["red"],"blink":false,"periodMs":0}"#)
            try await RunCrashTests.send(broker, [("bob", RunCrashTests.altoetting)], tst: 200)
            try await lamp.expect(#"{"pattern":"green","reason":null,"leds":["green"],"blink":false,"periodMs":0}"#)
            let state = try await RunHTTPTests.retained(broker, "ampel/device/bob/state")
            #expect(state.contains(#""texts":"ampel/rules/bavaria/green/"#) && !state.contains(#""rules":"#),
                    "the default state names its texts' topic instead of carrying them: \(state)")
            #expect(try await lamp.terminateAndWait() == 0)
            #expect(try await daemon.stop().exitCode == 0, "\(daemon.stderr)")
        }
    }

    @Test(arguments: [
        ["lamp", "--json"],
        ["lamp", "--json", "--district", "09162", "--device", "a"],
        ["lamp", "--json", "--district", "09/162"],
        ["lamp", "--json", "--device", "a/+"],
        ["lamp", "--json", "--district", "09162", "--base", ""],
    ])
    func badArgumentsExitNonZero(_ arguments: [String]) async throws {
        let lamp = try LampProcess.start(arguments)
        // A lamp that took the arguments would run on after the test.
        defer { lamp.terminate() }
        let status = try await lamp.wait(timeout: .seconds(30))
        #expect(status != 0)
        #expect(lamp.remainingLines().isEmpty)
    }
}

// MARK: - Helpers (local to this file: the lamp test needs nothing but processes)

enum LampTestError: Error, CustomStringConvertible {
    case missing(String)
    case timeout(String)
    case failed(String)

    var description: String {
        switch self {
        case .missing(let what): "missing: \(what)"
        case .timeout(let what): "timed out: \(what)"
        case .failed(let what): "failed: \(what)"
        }
    }
}

/// Finds an executable on PATH or in the usual places.
func findExecutable(_ name: String) throws -> URL {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    for directory in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
        let candidate = URL(fileURLWithPath: directory).appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    throw LampTestError.missing("\(name) (apt-get install mosquitto mosquitto-clients)")
}

/// Lines from a pipe, handed out one at a time with a deadline.
final class LineQueue: @unchecked Sendable {
    // All state is guarded by `lock`.
    private let lock = NSLock()
    private var buffer = Data()
    private var lines: [String] = []
    private var closed = false
    private var waiter: (id: Int, continuation: CheckedContinuation<String?, Never>)?
    private var nextWaiterID = 0

    /// A chunk of the stream, or (empty) its end.
    func append(_ data: Data) {
        var ready: [(CheckedContinuation<String?, Never>, String)] = []
        lock.lock()
        if data.isEmpty { closed = true }
        buffer.append(data)
        while let newline = buffer.firstIndex(of: 0x0A) {
            let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex...newline)
            if let current = waiter {
                waiter = nil
                ready.append((current.continuation, line))
            } else {
                lines.append(line)
            }
        }
        var closing: CheckedContinuation<String?, Never>?
        if closed, let current = waiter {
            waiter = nil
            closing = current.continuation
        }
        lock.unlock()
        for (continuation, line) in ready { continuation.resume(returning: line) }
        closing?.resume(returning: nil)
    }

    /// The next line, or nil when the stream ended or `timeout` passed first.
    func next(timeout: Duration) async -> String? {
        await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            lock.lock()
            if !lines.isEmpty {
                let line = lines.removeFirst()
                lock.unlock()
                continuation.resume(returning: line)
                return
            }
            if closed {
                lock.unlock()
                continuation.resume(returning: nil)
                return
            }
            nextWaiterID += 1
            let id = nextWaiterID
            waiter = (id, continuation)
            lock.unlock()
            Task {
                await threadSleep(for: timeout)  // a deadline, not a wait for the event
                self.expire(id)
            }
        }
    }

    func drain() -> [String] {
        lock.lock()
        defer { lock.unlock() }
        let rest = lines
        lines.removeAll()
        return rest
    }

    private func expire(_ id: Int) {
        lock.lock()
        guard let current = waiter, current.id == id else {
            lock.unlock()
            return
        }
        waiter = nil
        lock.unlock()
        current.continuation.resume(returning: nil)
    }
}

/// A running `ampel` with its standard output read line by line (blocking reads on threads of
/// their own, not `FileHandle.readabilityHandler`: see ``ChildProcess``).
final class LampProcess: Sendable {
    let output: LineQueue
    let errors: LineQueue
    private let exited: LineQueue
    private let child: ChildProcess

    private init(_ arguments: [String]) throws {
        let output = LineQueue(), errors = LineQueue(), exited = LineQueue()
        child = try AmpelBinary.launch(
            arguments, output: .read { output.append($0) }, errors: .read { errors.append($0) },
            onExit: { status in exited.append(Data("\(status.terminationStatus)\n".utf8)) })
        self.output = output
        self.errors = errors
        self.exited = exited
    }

    static func start(_ arguments: [String]) throws -> LampProcess {
        try LampProcess(arguments)
    }

    /// Awaits the next line of standard output and checks it.
    func expect(_ expected: String, timeout: Duration = .seconds(20), sourceLocation: SourceLocation = #_sourceLocation) async throws {
        guard let line = await output.next(timeout: timeout) else {
            let stderr = errors.drain().joined(separator: "\n")
            throw LampTestError.timeout("expected \(expected); stderr: \(stderr)")
        }
        #expect(line == expected, sourceLocation: sourceLocation)
    }

    func wait(timeout: Duration) async throws -> Int32 {
        guard let status = await exited.next(timeout: timeout), let code = Int32(status) else {
            child.signal(SIGTERM)
            throw LampTestError.timeout("ampel did not exit")
        }
        return code
    }

    func terminateAndWait() async throws -> Int32 {
        child.signal(SIGTERM)
        return try await wait(timeout: .seconds(20))
    }

    func terminate() {
        child.signal(SIGTERM)
    }

    /// Lines printed but not yet read.
    func remainingLines() -> [String] { output.drain() }
}

/// Publishes with `mosquitto_pub -q 1`: each call returns once the broker has the message.
struct Publisher {
    let port: Int

    func send(_ topic: String, _ payload: String, retain: Bool = false) async throws {
        try await send(topic, bytes: Array(payload.utf8), retain: retain)
    }

    func send(_ topic: String, bytes: [UInt8], retain: Bool = false) async throws {
        var payload = ["-n"]  // mosquitto_pub sends an empty payload with -n, not with an empty -f file
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-lamp-payload-\(UUID().uuidString)")
        if !bytes.isEmpty {
            try Data(bytes).write(to: file)
            payload = ["-f", file.path]
        }
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = try findExecutable("mosquitto_pub")
        process.arguments = ["-h", "127.0.0.1", "-p", String(port), "-q", "1", "-t", topic] + payload + (retain ? ["-r"] : [])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let exited = LineQueue()
        process.terminationHandler = { process in exited.append(Data("\(process.terminationStatus)\n".utf8)) }
        try process.run()
        guard let status = await exited.next(timeout: .seconds(20)) else {
            process.terminate()
            throw LampTestError.timeout("mosquitto_pub \(topic)")
        }
        guard status == "0" else { throw LampTestError.failed("mosquitto_pub \(topic): exit \(status)") }
    }
}
