import AmpelTestSupport
import Foundation
import Testing

/// Runs `body` with a daemon (`ampel run`, or `ampel replay`) started on `arguments`, and ends the
/// daemon afterwards whether the body returns or throws: SIGKILL unless it has stopped already,
/// reaped, its configuration file removed. No test leaves a daemon running against a broker that
/// is gone. When the body throws, the daemon's standard error is attached to the test.
///
/// The body stops, kills or awaits the end of the daemon itself when that is what it tests
/// (``DaemonProcess/stop()``, ``DaemonProcess/kill()``, ``DaemonProcess/exit()``); a restart is a second `withDaemon`.
/// - Parameters:
///   - environment: added to the test process's environment. The HTTP server listens on a port
///     the system chooses (`AMPEL_HTTP=127.0.0.1:0`) unless `environment` or the arguments say
///     otherwise: tests run side by side.
///   - configuration: the YAML of the daemon's `--config` file.
///   - command: `run`, or `replay` for the daemon on the bundled history.
func withDaemon<T>(
    _ arguments: [String], environment: [String: String] = [:], configuration: String = DaemonProcess.replayConfiguration,
    command: String = "run", _ body: (DaemonProcess) async throws -> T
) async throws -> T {
    let daemon = try DaemonProcess(arguments, environment: environment, configuration: configuration, command: command)
    do {
        let result = try await body(daemon)
        await daemon.end()
        return result
    } catch {
        Attachment.record(daemon.stderr, named: "ampel-\(command).stderr.txt")
        await daemon.end()
        throw error
    }
}

/// A running `ampel run` or `ampel replay`, as ``withDaemon(_:environment:configuration:command:_:)``
/// hands it over: its standard error collected, its end awaitable.
final class DaemonProcess: Sendable {
    let process: ChildProcess
    private let configurationFile: URL
    private let collected = Watched("")
    /// How it ended and when it was reaped, read on the reaping thread: a busy test process
    /// may resume the task that awaits ``exit()`` much later.
    private let ended = Watched<(status: ChildProcess.Status, at: ContinuousClock.Instant)?>(nil)

    /// The configuration file unless a test gives its own: the tests' fixes carry fixed
    /// timestamps (`tst` 100, 1000, 1700000000), far behind the clock, which the default
    /// `alerts.max_fix_age` would take for a phone's queue delivered late.
    static let replayConfiguration = "alerts:\n  max_fix_age: false\n"

    /// Starts the daemon; ``withDaemon(_:environment:configuration:command:_:)`` and ``Scene``
    /// (whose scene ends it) are the only callers, so that every daemon is ended.
    init(_ arguments: [String], environment: [String: String], configuration: String, command: String) throws {
        var environment = environment
        if environment["AMPEL_HTTP"] == nil { environment["AMPEL_HTTP"] = "127.0.0.1:0" }
        let collected = self.collected
        let ended = self.ended
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-run-\(UUID().uuidString).yaml")
        try configuration.write(to: file, atomically: true, encoding: .utf8)
        configurationFile = file
        do {
            process = try AmpelBinary.launch(
                [command, "--config", file.path] + arguments,
                environment: ProcessInfo.processInfo.environment.merging(environment) { $1 }, output: .discard,
                errors: .read { data in collected.update { $0 += String(decoding: data, as: UTF8.self) } },
                onExit: { status in ended.update { $0 = (status, .now) } })
        } catch {
            try? FileManager.default.removeItem(at: file)
            throw error
        }
    }

    var stderr: String { collected.value }
    /// When the process was reaped.
    var exitedAt: ContinuousClock.Instant? { ended.value?.at }

    /// How often the daemon's standard error contains `text` so far.
    func logCount(_ text: String) -> Int { Self.count(text, in: collected.value) }

    static func count(_ text: String, in log: String) -> Int { log.components(separatedBy: text).count - 1 }

    /// Until the daemon's standard error contains `text` `count` times.
    func awaitLog(_ text: String, count: Int, timeout: Duration = .seconds(60)) async throws {
        let collected = self.collected
        try await withTimeout(timeout, "\(count) times '\(text)' in the daemon's log") {
            await collected.wait { Self.count(text, in: $0) >= count }
        }
    }

    /// Until the daemon's standard error contains `text`.
    func awaitLog(_ text: String, timeout: Duration = .seconds(60)) async throws {
        let collected = self.collected
        try await withTimeout(timeout, "'\(text)' in the daemon's log") {
            await collected.wait { $0.contains(text) }
        }
    }

    /// The HTTP server's base URL (`http://127.0.0.1:<port>`), once it listens.
    func httpURL(timeout: Duration = .seconds(60)) async throws -> String {
        let marker = "serving HTTP on "
        try await awaitLog(marker, timeout: timeout)
        let text = stderr
        guard let range = text.range(of: marker) else { throw TestTimeout(description: "no HTTP address in the log") }
        let address = text[range.upperBound...].prefix { !$0.isWhitespace }
        return String(address.hasSuffix("/") ? address.dropLast() : address)
    }

    /// SIGTERM, then how it ended.
    func stop() async throws -> ChildProcess.Status {
        process.signal(SIGTERM)
        return try await exit()
    }

    /// SIGKILL (unless it has ended already), then how it ended.
    func kill() async throws -> ChildProcess.Status {
        process.signal(SIGKILL)
        return try await exit()
    }

    /// How it ended, once it has (as often as asked).
    func exit() async throws -> ChildProcess.Status {
        let ended = self.ended
        return try await withTimeout(.seconds(30), "the daemon to end") {
            await ended.wait { $0 != nil }
            guard let status = ended.value?.status else { throw TestTimeout(description: "no exit status") }
            return status
        }
    }

    /// The end of every daemon, whatever the test did with it: killed unless it has ended,
    /// reaped, its configuration file removed.
    func end() async {
        _ = try? await kill()
        try? FileManager.default.removeItem(at: configurationFile)
    }
}
