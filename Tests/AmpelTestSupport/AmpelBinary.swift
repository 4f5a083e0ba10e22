import Foundation

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

    /// Runs `ampel` to its end in English without colours, whatever the machine's locale
    /// (``run(_:stdin:environment:directory:errorsIntoOutput:terminal:)``).
    public static func run(plain arguments: [String]) async throws -> Output {
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = "1"
        environment["LANG"] = "en_US.UTF-8"
        environment["LC_ALL"] = nil
        environment["LC_MESSAGES"] = nil
        return try await run(arguments, environment: environment)
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
        let ended = try await ChildProcess.toEnd(errorsIntoOutput: errorsIntoOutput) { output, errors, onExit in
            try launch(arguments, environment: environment, directory: directory, inputFile: inURL, terminal: terminal,
                       output: output, errors: errors, onExit: onExit)
        }
        // As Foundation's `Process.terminationStatus`: the exit code, or the signal that ended it.
        return Output(stdout: ended.stdout, stderr: ended.stderr, exitCode: ended.status.terminationStatus)
    }
}
