import AmpelTestSupport
import Foundation
import Synchronization

/// The `ampel-mqtt-probe` executable (built next to the test binary) as a child process whose
/// output lines can be awaited.
final class ProbeProcess: Sendable {
    /// What the probe printed, shared with the thread that reads its output.
    private final class Output: Sendable {
        private struct State {
            var lines: [String] = []
            var partial = ""
            var exited = false
            var waiters: [(text: String, continuation: CheckedContinuation<Bool, Never>)] = []
        }
        private let state = Mutex(State())

        var lines: [String] { state.withLock { $0.lines } }

        /// A chunk of output, or (empty) its end.
        func received(_ data: Data) {
            let ready: [(CheckedContinuation<Bool, Never>, Bool)] = state.withLock { state in
                if data.isEmpty {
                    state.exited = true
                    defer { state.waiters = [] }
                    return state.waiters.map { ($0.continuation, false) }
                }
                state.partial += String(decoding: data, as: UTF8.self)
                while let newline = state.partial.firstIndex(of: "\n") {
                    state.lines.append(String(state.partial[..<newline]))
                    state.partial = String(state.partial[state.partial.index(after: newline)...])
                }
                let lines = state.lines
                let ready = state.waiters.filter { waiter in lines.contains { $0.contains(waiter.text) } }
                state.waiters.removeAll { waiter in lines.contains { $0.contains(waiter.text) } }
                return ready.map { ($0.continuation, true) }
            }
            for (continuation, found) in ready { continuation.resume(returning: found) }
        }

        /// True once a line contains `text`; false if the output ends first.
        func line(containing text: String) async -> Bool {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let result: Bool? = state.withLock { state in
                    if state.lines.contains(where: { $0.contains(text) }) { return true }
                    if state.exited { return false }
                    state.waiters.append((text, continuation))
                    return nil
                }
                if let result { continuation.resume(returning: result) }
            }
        }
    }
    private let outputLines = Output()
    private let child: ChildProcess

    /// Path of the probe: the directory of the running test binary holds all built products.
    static var executablePath: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
        // macOS: .../AmpelPackageTests.xctest/Contents/MacOS/AmpelPackageTests
        while directory.path.contains(".xctest") { directory.deleteLastPathComponent() }
        return directory.appendingPathComponent("ampel-mqtt-probe").path
    }

    /// Starts the probe; its output is read with blocking reads, not a libdispatch source (see
    /// ``ChildProcess``).
    init(arguments: [String]) throws {
        let output = outputLines
        child = try ChildProcess(
            Self.executablePath, arguments, output: .read { output.received($0) }, errors: .sameAsOutput, onExit: { _ in })
    }

    deinit {
        child.signal(SIGKILL)
    }

    var pid: Int32 { child.pid }
    var output: [String] { outputLines.lines }

    /// Waits for an output line containing `text`; throws if the probe ends first.
    func waitForLine(_ text: String, timeout: Duration = .seconds(15)) async throws {
        let lines = outputLines
        let found = try await withTimeout(timeout, "probe output '\(text)'") { await lines.line(containing: text) }
        if !found { throw TestTimeout(description: "probe ended without '\(text)': \(output)") }
    }

    /// SIGKILL: the process dies without any chance to send DISCONNECT.
    func killHard() {
        child.signal(SIGKILL)
    }
}
