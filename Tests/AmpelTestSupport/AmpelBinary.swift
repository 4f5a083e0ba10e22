import Foundation

/// Runs the built `ampel` executable as a user would: arguments, standard input, exit code.
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

    /// Runs `ampel` with the arguments and standard input, waiting for it to exit.
    ///
    /// Input and outputs go through temporary files, so large inputs and outputs cannot
    /// dead-lock on pipe buffers.
    public static func run(
        _ arguments: [String], stdin: Data = Data(), environment: [String: String]? = nil
    ) async throws -> Output {
        let fm = FileManager.default
        let dir = fm.temporaryDirectory.appendingPathComponent("ampel-binary-\(UUID().uuidString)")
        try fm.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: dir) }
        let inURL = dir.appendingPathComponent("stdin"), outURL = dir.appendingPathComponent("stdout")
        let errURL = dir.appendingPathComponent("stderr")
        try stdin.write(to: inURL)
        try Data().write(to: outURL)
        try Data().write(to: errURL)
        let input = try FileHandle(forReadingFrom: inURL)
        let output = try FileHandle(forWritingTo: outURL)
        let error = try FileHandle(forWritingTo: errURL)
        defer {
            try? input.close()
            try? output.close()
            try? error.close()
        }

        let process = Process()
        process.executableURL = try url()
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        return Output(stdout: try Data(contentsOf: outURL), stderr: try Data(contentsOf: errURL), exitCode: status)
    }
}
