import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child process for tests: started with `posix_spawnp`, its output read with blocking
/// `read` calls on threads of its own, its exit awaited with a blocking `waitid` on another.
///
/// Not Foundation's `Process` with `FileHandle.readabilityHandler`: a readability handler is a
/// libdispatch read source on a `dup` of the pipe, and on Linux the teardown of such sources
/// (a child exits, its pipe hangs up, the source is cancelled while new pipes for the next child
/// reuse the descriptor numbers) can leave libdispatch's epoll bookkeeping with a freed entry.
/// The test process then dies with SIGSEGV in `_dispatch_event_loop_drain` on libdispatch's
/// manager thread; it happened when a test killed and restarted its broker. A blocking read
/// registers nothing with libdispatch, so there is nothing to tear down.
///
/// The pipes are close-on-exec and the child gets only descriptors 0, 1 and 2, so no pipe end
/// leaks into another child (which would hold its end of file back), and the child starts with
/// no signals blocked (the test runner's threads block some).
public final class ChildProcess: Sendable {
    /// Where standard output or standard error goes.
    public enum Output: Sendable {
        /// To `/dev/null`.
        case discard
        /// Into a pipe read on a thread of its own: `handler` gets each chunk as it arrives and,
        /// at the end of the stream, one empty `Data`.
        case read(@Sendable (Data) -> Void)
        /// Standard error only: into the same pipe as standard output.
        case sameAsOutput
    }

    /// How the child ended (a `waitpid` status).
    public struct Status: Sendable, Equatable, CustomStringConvertible {
        public let raw: Int32
        /// The exit code, if the child exited.
        public var exitCode: Int32? { raw & 0x7f == 0 ? (raw >> 8) & 0xff : nil }
        /// The signal that ended the child, if one did.
        public var signal: Int32? { raw & 0x7f != 0 && raw & 0x7f != 0x7f ? raw & 0x7f : nil }
        /// As Foundation's `Process.terminationStatus`: the exit code, or the signal number.
        public var terminationStatus: Int32 { exitCode ?? signal ?? raw }
        public var description: String {
            if let exitCode { return "exit code \(exitCode)" }
            if let signal { return "signal \(signal)" }
            return "status \(raw)"
        }
    }

    public struct SpawnError: Error, CustomStringConvertible {
        public let description: String
    }

    public let pid: pid_t
    private struct State {
        /// Set, under the lock, before the child is reaped: ``signal(_:)`` never hits a reused pid.
        var exited = false
        var inputFD: Int32 = -1
    }
    /// Shared with the thread that reaps the child, which must not keep `self` alive.
    private final class Shared: Sendable {
        let state: Mutex<State>
        init(_ state: State) { self.state = Mutex(state) }
    }
    private let shared: Shared

    /// A watcher process that blocks reading a pipe only this test process writes to. When the
    /// test process ends, even by crashing, the pipe closes, the read returns and the watcher
    /// SIGKILLs `pid` (a broker). On a normal stop the caller kills the watcher first, then
    /// `pid`, then closes the watcher's input. Nil if it could not be started: the caller's own
    /// stop still ends `pid`.
    public static func guarding(_ pid: pid_t) -> ChildProcess? {
        try? ChildProcess(
            "/bin/sh", ["-c", "read -r _; kill -9 \"$1\" 2>/dev/null", "ampel-broker-guard", "\(pid)"],
            inputPipe: true, output: .discard, errors: .discard, onExit: { _ in })
    }

    /// Starts `path` (searched in `PATH` when it has no slash) with `arguments`.
    ///
    /// - Parameters:
    ///   - inputPipe: standard input is a pipe that stays open until ``closeInput()`` (or this
    ///     object goes away); otherwise `inputFile`, or `/dev/null`.
    ///   - inputFile: a file standard input reads (a large input cannot block on a pipe's buffer).
    ///   - environment: the child's whole environment; nil inherits this process's.
    ///   - directory: the child's working directory; nil inherits this process's.
    ///   - onExit: called once, on a thread of its own, when the child has ended and is reaped.
    public init(
        _ path: String, _ arguments: [String], inputPipe: Bool = false, inputFile: String? = nil,
        environment: [String: String]? = nil, directory: String? = nil, output: Output, errors: Output,
        onExit: @escaping @Sendable (Status) -> Void
    ) throws {
        precondition(!(inputPipe && inputFile != nil), "standard input is either a pipe or a file")
        var opened: [Int32] = []
        func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else { throw SpawnError(description: "pipe: \(String(cString: strerror(errno)))") }
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            opened += fds
            return (fds[0], fds[1])
        }
        defer {
            // On success only the parent's ends are left open (and removed from `opened`).
            for fd in opened { close(fd) }
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var inputWrite: Int32 = -1
        if inputPipe {
            let input = try makePipe()
            posix_spawn_file_actions_adddup2(&actions, input.read, 0)
            inputWrite = input.write
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, inputFile ?? "/dev/null", O_RDONLY, 0)
        }
        var readers: [(fd: Int32, handler: @Sendable (Data) -> Void)] = []
        var outputWrite: Int32 = -1
        switch output {
        case .read(let handler):
            let pipe = try makePipe()
            posix_spawn_file_actions_adddup2(&actions, pipe.write, 1)
            readers.append((pipe.read, handler))
            outputWrite = pipe.write
        case .discard, .sameAsOutput:
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        switch errors {
        case .read(let handler):
            let pipe = try makePipe()
            posix_spawn_file_actions_adddup2(&actions, pipe.write, 2)
            readers.append((pipe.read, handler))
        case .sameAsOutput where outputWrite >= 0:
            posix_spawn_file_actions_adddup2(&actions, outputWrite, 2)
        case .discard, .sameAsOutput:
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        Self.closeInheritedDescriptors(&actions)
        if let directory { try Self.changeDirectory(&actions, to: directory) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { settings in
            settings.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer { envp?.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned: Int32
        if let envp {
            spawned = posix_spawnp(&pid, path, &actions, &attributes, argv, envp)
        } else {
            spawned = posix_spawnp(&pid, path, &actions, &attributes, argv, environ)
        }
        guard spawned == 0 else {
            throw SpawnError(description: "cannot run \(path): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        // The parent keeps the read ends of output pipes and the write end of the input pipe.
        let kept = readers.map(\.fd) + (inputWrite >= 0 ? [inputWrite] : [])
        opened.removeAll { kept.contains($0) }
        let shared = Shared(State(inputFD: inputWrite))
        self.shared = shared

        for (fd, handler) in readers {
            Thread { Self.readUntilEnd(fd, handler) }.start()
        }
        let childPID = pid
        Thread {
            // Wait without reaping, mark the child as gone, then reap: between the two, the
            // pid cannot be reused, and signal(_:) checks the mark under the same lock.
            var info = siginfo_t()
            while waitid(P_PID, id_t(childPID), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
            shared.state.withLock { $0.exited = true }
            var status: Int32 = 0
            while waitpid(childPID, &status, 0) == -1 && errno == EINTR {}
            onExit(Status(raw: status))
        }.start()
    }

    deinit {
        closeInput()
    }

    /// Whether the child has not ended yet.
    public var isRunning: Bool { shared.state.withLock { !$0.exited } }

    /// Sends `signal` unless the child has already ended.
    public func signal(_ signal: Int32) {
        shared.state.withLock { state in
            if !state.exited { _ = kill(pid, signal) }
        }
    }

    /// Closes the parent's end of the input pipe: the child reads end of file. Idempotent.
    public func closeInput() {
        let fd: Int32 = shared.state.withLock { state in
            defer { state.inputFD = -1 }
            return state.inputFD
        }
        if fd >= 0 { close(fd) }
    }

    /// Runs `path` to its end and returns how it ended and what it wrote to standard output and
    /// standard error (one stream).
    public static func run(_ path: String, _ arguments: [String]) async throws -> (status: Status, output: String) {
        let ended = try await toEnd(errorsIntoOutput: true) { output, errors, onExit in
            try ChildProcess(path, arguments, output: output, errors: errors, onExit: onExit)
        }
        return (ended.status, String(decoding: ended.stdout, as: UTF8.self))
    }

    /// Starts a child with `start`, handing it the output handlers and the exit handler, and
    /// returns once both output streams have ended and the child is reaped: how it ended and
    /// what it wrote. With `errorsIntoOutput`, standard error goes into standard output
    /// (`2>&1`, in the order written) and `stderr` is empty.
    public static func toEnd(
        errorsIntoOutput: Bool,
        _ start: (_ output: Output, _ errors: Output, _ onExit: @escaping @Sendable (Status) -> Void) throws -> ChildProcess
    ) async throws -> (status: Status, stdout: Data, stderr: Data) {
        let collected = Collected(streams: errorsIntoOutput ? 1 : 2)
        return try await withCheckedThrowingContinuation { continuation in
            collected.start(continuation)
            do {
                _ = try start(.read { collected.append($0, error: false) },
                              errorsIntoOutput ? .sameAsOutput : .read { collected.append($0, error: true) },
                              { collected.exited($0) })
            } catch {
                collected.failed(error)
            }
        }
    }

    private static func readUntilEnd(_ fd: Int32, _ handler: @Sendable (Data) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count > 0 {
                handler(Data(buffer[0..<count]))
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        close(fd)
        handler(Data())
    }

    /// Adds "close every descriptor from 3 on" to `actions`, so that the child inherits none of
    /// this process's descriptors (libmosquitto's sockets, say, are not close-on-exec).
    /// glibc 2.34 has the action; the Glibc module does not show it (a GNU extension), so it is
    /// looked up at run time. Without it the child still gets none of our own pipes: they are
    /// close-on-exec.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = addCloseFrom else { return }
        _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, 3)
    }

    private nonisolated(unsafe) static let addCloseFrom: UnsafeMutableRawPointer? =
        dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")

    /// Adds "change into `directory`" to `actions` (glibc 2.29; looked up at run time as
    /// ``closeInheritedDescriptors(_:)`` is). Unlike that one it cannot be left out: a child in
    /// the wrong directory would test something else, so its absence is an error.
    private static func changeDirectory(_ actions: inout posix_spawn_file_actions_t, to directory: String) throws {
        typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
        guard let symbol = addChdir else {
            throw SpawnError(description: "this C library cannot start a child in another directory")
        }
        let added = directory.withCString { unsafeBitCast(symbol, to: AddChdir.self)(&actions, $0) }
        guard added == 0 else { throw SpawnError(description: "chdir \(directory): \(String(cString: strerror(added)))") }
    }

    private nonisolated(unsafe) static let addChdir: UnsafeMutableRawPointer? =
        dlsym(nil, "posix_spawn_file_actions_addchdir_np")
}

/// The state of ``ChildProcess/toEnd(errorsIntoOutput:_:)``: done once every output stream has
/// ended and the child was reaped.
private final class Collected: Sendable {
    typealias Ended = (status: ChildProcess.Status, stdout: Data, stderr: Data)
    private struct State {
        var continuation: CheckedContinuation<Ended, any Error>?
        var stdout = Data(), stderr = Data()
        var openStreams: Int
        var status: ChildProcess.Status?
    }
    private let state: Mutex<State>

    init(streams: Int) { state = Mutex(State(openStreams: streams)) }

    func start(_ continuation: CheckedContinuation<Ended, any Error>) {
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
        let done: (CheckedContinuation<Ended, any Error>, Ended)? = state.withLock { state in
            update(&state)
            guard state.openStreams == 0, let status = state.status, let continuation = state.continuation else { return nil }
            state.continuation = nil
            return (continuation, (status, state.stdout, state.stderr))
        }
        if let (continuation, ended) = done { continuation.resume(returning: ended) }
    }
}
