import AmpelTestSupport
import Foundation
import Synchronization

/// The `ampel-mqtt-probe` executable (built next to the test binary) as a child process whose
/// output lines can be awaited.
final class ProbeProcess: Sendable {
    private struct State {
        var lines: [String] = []
        var partial = ""
        var exited = false
        var waiters: [(text: String, continuation: CheckedContinuation<Bool, Never>)] = []
    }
    private let state = Mutex(State())
    private let process: Mutex<Process>

    /// Path of the probe: the directory of the running test binary holds all built products.
    static var executablePath: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
        // macOS: .../AmpelPackageTests.xctest/Contents/MacOS/AmpelPackageTests
        while directory.path.contains(".xctest") { directory.deleteLastPathComponent() }
        return directory.appendingPathComponent("ampel-mqtt-probe").path
    }

    init(arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executablePath)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        self.process = Mutex(process)
        output.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                self?.finished()
            } else {
                self?.received(String(decoding: data, as: UTF8.self))
            }
        }
        try process.run()
    }

    deinit {
        process.withLock { process in
            if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        }
    }

    var pid: Int32 { process.withLock { $0.processIdentifier } }
    var output: [String] { state.withLock { $0.lines } }

    private func received(_ text: String) {
        let ready: [CheckedContinuation<Bool, Never>] = state.withLock { state in
            state.partial += text
            while let newline = state.partial.firstIndex(of: "\n") {
                state.lines.append(String(state.partial[..<newline]))
                state.partial = String(state.partial[state.partial.index(after: newline)...])
            }
            let lines = state.lines
            let ready = state.waiters.filter { waiter in lines.contains { $0.contains(waiter.text) } }
            state.waiters.removeAll { waiter in lines.contains { $0.contains(waiter.text) } }
            return ready.map(\.continuation)
        }
        for continuation in ready { continuation.resume(returning: true) }
    }

    private func finished() {
        let waiters = state.withLock { state in
            state.exited = true
            let waiters = state.waiters.map(\.continuation)
            state.waiters = []
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: false) }
    }

    /// Waits for an output line containing `text`; throws if the probe ends first.
    func waitForLine(_ text: String, timeout: Duration = .seconds(15)) async throws {
        let found = try await withTimeout(timeout, "probe output '\(text)'") { [self] in
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
        if !found { throw TestTimeout(description: "probe ended without '\(text)': \(output)") }
    }

    /// SIGKILL: the process dies without any chance to send DISCONNECT.
    func killHard() {
        _ = Glibc.kill(pid, SIGKILL)
    }
}
