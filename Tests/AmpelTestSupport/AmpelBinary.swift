import Foundation
import Synchronization

/// Runs the built `ampel` executable as a user would: arguments, environment, standard input,
/// its outputs and its exit status. Every test that runs the binary starts it here.
///
/// CLI tests exercise the real binary (argument parsing, streaming I/O, exit codes) rather than
/// calling command types in-process. The binary is found next to the test bundle in the build
/// products directory (`swift build --build-tests` builds it), or at `$AMPEL_BINARY`.
public enum AmpelBinary {
    /// What one run produced.
    public struct Output: Sendable {
        public let stdout: Data
        public let stderr: Data
        public let exitCode: Int32

        /// Standard output as UTF-8 text.
        public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
        /// Standard error as UTF-8 text.
        public var stderrText: String { String(decoding: stderr, as: UTF8.self) }
        /// Standard output split into lines (the final newline does not make an empty last line).
        public var stdoutLines: [String] {
            var lines = stdoutText.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if lines.last == "" { lines.removeLast() }
            return lines
        }
    }

    /// The binary could not be found or started.
    public struct NotFound: Error, CustomStringConvertible {
        public let searched: [String]
        public var description: String {
            "built ampel executable not found (run `swift build --build-tests`); searched: \(searched.joined(separator: ", "))"
        }
    }

    /// The path of the built `ampel` executable.
    public static func url(filePath: String = #filePath) throws -> URL {
        var candidates: [URL] = []
        if let override = ProcessInfo.processInfo.environment["AMPEL_BINARY"] {
            candidates.append(URL(fileURLWithPath: override))
        }
        // The test runner lives in the products directory (Linux: .../debug/XPackageTests.xctest;
        // macOS: .../debug/XPackageTests.xctest/Contents/MacOS/...).
        for bundle in [Bundle.main] + Bundle.allBundles {
            var dir = bundle.bundleURL
            for _ in 0..<4 {
                candidates.append(dir.appendingPathComponent("ampel"))
                dir = dir.deletingLastPathComponent()
            }
        }
        if let exe = Bundle.main.executableURL {
            candidates.append(exe.deletingLastPathComponent().appendingPathComponent("ampel"))
        }
        // Last resort: the package's default build directory, relative to this file.
        let root = URL(fileURLWithPath: filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/ampel"))
        let fm = FileManager.default
        for url in candidates {
            var isDir: ObjCBool = false
            if fm.fileExists(atPath: url.path, isDirectory: &isDir), !isDir.boolValue, fm.isExecutableFile(atPath: url.path) {
                return url
            }
        }
        throw NotFound(searched: candidates.map(\.path))
    }

    /// Starts the built `ampel`: the one place that runs it, for one-shot commands (``run(_:stdin:environment:directory:errorsIntoOutput:terminal:)``)
    /// and for the processes tests keep running (the daemon, `ampel lamp`).
    ///
    /// - Parameters:
    ///   - environment: its whole environment; nil inherits the test process's.
    ///   - directory: its working directory; nil inherits the test process's.
    ///   - inputFile: a file standard input reads; otherwise `/dev/null`.
    ///   - terminal: standard output is a pseudo-terminal (util-linux `script`), for what `ampel`
    ///     does only on a terminal (colours); `script` then is the child, and its exit status `ampel`'s.
    public static func launch(
        _ arguments: [String], environment: [String: String]? = nil, directory: URL? = nil, inputFile: URL? = nil,
        terminal: Bool = false, output: ChildProcess.Output, errors: ChildProcess.Output,
        onExit: @escaping @Sendable (ChildProcess.Status) -> Void
    ) throws -> ChildProcess {
        let binary = try url().path
        var path = binary, argv = arguments
        if terminal {
            func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'" }
            path = "/usr/bin/script"
            argv = ["-qec", ([binary] + arguments).map(quoted).joined(separator: " "), "/dev/null"]
        }
        return try ChildProcess(
            path, argv, inputFile: inputFile?.path, environment: environment, directory: directory?.path,
            output: output, errors: errors, onExit: onExit)
    }

    /// Runs `ampel` with the arguments and standard input to its end (``launch(_:environment:directory:inputFile:terminal:output:errors:onExit:)``).
    ///
    /// Standard input comes from a temporary file, so that a large input cannot block on a pipe
    /// while `ampel` writes; both outputs are read as they come.
    /// - Parameter errorsIntoOutput: standard error goes into standard output (`2>&1`), in the
    ///   order written; ``Output/stderr`` is then empty.
    public static func run(
        _ arguments: [String], stdin: Data = Data(), environment: [String: String]? = nil, directory: URL? = nil,
        errorsIntoOutput: Bool = false, terminal: Bool = false
    ) async throws -> Output {
        let fm = FileManager.default
        let inURL = fm.temporaryDirectory.appendingPathComponent("ampel-binary-stdin-\(UUID().uuidString)")
        try stdin.write(to: inURL)
        defer { try? fm.removeItem(at: inURL) }
        let run = OneRun(streams: errorsIntoOutput ? 1 : 2)
        return try await withCheckedThrowingContinuation { continuation in
            run.start(continuation)
            do {
                _ = try launch(
                    arguments, environment: environment, directory: directory, inputFile: inURL, terminal: terminal,
                    output: .read { run.append($0, error: false) },
                    errors: errorsIntoOutput ? .sameAsOutput : .read { run.append($0, error: true) },
                    onExit: { run.exited($0) })
            } catch {
                run.failed(error)
            }
        }
    }
}

/// The state of ``AmpelBinary/run(_:stdin:environment:directory:errorsIntoOutput:terminal:)``: done
/// once every output stream has ended and the child is reaped.
private final class OneRun: Sendable {
    private struct State {
        var continuation: CheckedContinuation<AmpelBinary.Output, any Error>?
        var stdout = Data(), stderr = Data()
        var openStreams: Int
        var status: ChildProcess.Status?
    }
    private let state: Mutex<State>

    init(streams: Int) { state = Mutex(State(openStreams: streams)) }

    func start(_ continuation: CheckedContinuation<AmpelBinary.Output, any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    /// A chunk of standard output or error; an empty one ends its stream.
    func append(_ data: Data, error: Bool) {
        finish { state in
            if data.isEmpty {
                state.openStreams -= 1
            } else if error {
                state.stderr.append(data)
            } else {
                state.stdout.append(data)
            }
        }
    }

    func exited(_ status: ChildProcess.Status) {
        finish { $0.status = status }
    }

    func failed(_ error: any Error) {
        let continuation = state.withLock { state in
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(throwing: error)
    }

    private func finish(_ update: (inout State) -> Void) {
        let done: (CheckedContinuation<AmpelBinary.Output, any Error>, AmpelBinary.Output)? = state.withLock { state in
            update(&state)
            guard state.openStreams == 0, let status = state.status, let continuation = state.continuation else { return nil }
            state.continuation = nil
            // As Foundation's `Process.terminationStatus`: the exit code, or the signal that ended it.
            return (continuation, AmpelBinary.Output(stdout: state.stdout, stderr: state.stderr, exitCode: status.terminationStatus))
        }
        if let (continuation, output) = done { continuation.resume(returning: output) }
    }
}
