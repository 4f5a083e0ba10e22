import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A real `mosquitto` broker for one test, on a free loopback port, with a generated config.
///
/// Tests never rely on a broker someone else started: each starts its own and awaits its
/// "running" log line (no sleeps). The broker can be killed with SIGKILL and restarted on the
/// same port with the same persistence directory, which is how reconnect and session tests
/// simulate a crash.
///
/// ```swift
/// let broker = try await MosquittoBroker.start()
/// defer { broker.stop() }
/// let url = broker.url   // mqtt://127.0.0.1:<port>
/// ```
///
/// Cleanup is belt and braces: ``stop()`` and `deinit` kill the process, and a tiny `sh` guard
/// process SIGKILLs it when the test process's end of a pipe closes, so even a crashed test
/// run leaves no `mosquitto` behind.
public final class MosquittoBroker: Sendable {
    /// What to put into the generated `mosquitto.conf`.
    public struct Options: Sendable {
        /// Keep sessions and queued messages in `mosquitto.db`. The broker saves on every change
        /// (`autosave_on_changes`), so a SIGKILL loses nothing; a restart reads it back.
        public var persistent: Bool
        /// Where `mosquitto.db` lives; nil uses the broker's own scratch directory.
        public var persistenceDirectory: String?
        /// A `password_file` (see ``MosquittoBroker/makePasswordFile(users:in:)``); when set,
        /// anonymous clients are refused.
        public var passwordFile: String?
        /// Adds a TLS listener on a second free port.
        public var tls: TLSListener?
        /// Raw lines appended to the config.
        public var extraConfig: [String]
        /// `max_queued_messages` (broker default 1000 silently drops QoS 1 traffic beyond it).
        public var maxQueuedMessages: Int
        /// `max_inflight_messages` (broker default 20 throttles QoS 1; 0 = unlimited).
        public var maxInflightMessages: Int
        /// `log_type all` (every packet) instead of connection-level lines.
        public var verboseLog: Bool

        public init(
            persistent: Bool = false, persistenceDirectory: String? = nil, passwordFile: String? = nil, tls: TLSListener? = nil,
            extraConfig: [String] = [], maxQueuedMessages: Int = 1_000_000, maxInflightMessages: Int = 0,
            verboseLog: Bool = false
        ) {
            self.persistent = persistent || persistenceDirectory != nil
            self.persistenceDirectory = persistenceDirectory
            self.passwordFile = passwordFile
            self.tls = tls
            self.extraConfig = extraConfig
            self.maxQueuedMessages = maxQueuedMessages
            self.maxInflightMessages = maxInflightMessages
            self.verboseLog = verboseLog
        }
    }

    /// A TLS listener's certificate files (see ``TLSTestCertificates``).
    public struct TLSListener: Sendable {
        public var caFile: String
        public var certFile: String
        public var keyFile: String
        public var requireClientCertificate: Bool

        public init(caFile: String, certFile: String, keyFile: String, requireClientCertificate: Bool = false) {
            self.caFile = caFile
            self.certFile = certFile
            self.keyFile = keyFile
            self.requireClientCertificate = requireClientCertificate
        }
    }

    public struct BrokerError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Always `127.0.0.1`.
    public let host = "127.0.0.1"
    /// The plain MQTT port.
    public let port: Int
    /// The TLS port, if ``Options/tls`` was given.
    public let tlsPort: Int?
    /// `mqtt://127.0.0.1:<port>`.
    public var url: String { "mqtt://\(host):\(port)" }
    /// The broker's scratch directory (config, default persistence, log).
    public let directory: String
    public let options: Options

    private struct State {
        var broker: ChildProcess?
        var guardProcess: ChildProcess?
        /// Counts launches, so that a late exit notice of an earlier run is ignored.
        var generation = 0
        /// Of the current run: its output ended, it was reaped. Both make the exit.
        var endsSeen = 0
        var log: [String] = []
        var partialLine = ""
        var waiters: [UUID: (predicate: @Sendable (String) -> Bool, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var exited = true
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
        var logStartOfRun = 0
    }

    private let state = Mutex(State())
    private let ownsDirectory: Bool

    private init(port: Int, tlsPort: Int?, directory: String, options: Options) {
        self.port = port
        self.tlsPort = tlsPort
        self.directory = directory
        self.options = options
        self.ownsDirectory = true
    }

    /// Starts a broker and returns when it logged that it is running.
    public static func start(_ options: Options = Options()) async throws -> MosquittoBroker {
        var lastError: (any Error)?
        // A free port can be taken between probing and binding; try a few.
        for _ in 0..<5 {
            let directory = try makeTemporaryDirectory(prefix: "ampel-mosquitto")
            let broker = MosquittoBroker(
                port: try freeLoopbackPort(), tlsPort: options.tls == nil ? nil : try freeLoopbackPort(),
                directory: directory, options: options)
            do {
                try await broker.launch()
                return broker
            } catch {
                lastError = error
                broker.stop()
            }
        }
        throw lastError ?? BrokerError(description: "mosquitto did not start")
    }

    deinit {
        killNow()
        if ownsDirectory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Starts the broker again (after ``kill()`` or ``stop()``) on the same ports and persistence.
    public func restart() async throws {
        try await launch()
    }

    /// SIGKILLs the broker (no clean shutdown, no Will delivery by it, clients see a broken
    /// connection) and returns once the process is gone.
    public func kill() async {
        killNow()
        await waitForExit()
    }

    /// Freezes the broker (SIGSTOP): connections stay open, nothing is answered until ``resume()``.
    public func pause() {
        state.withLock { $0.exited ? nil : $0.broker }?.signal(SIGSTOP)
    }

    /// Lets a paused broker run again (SIGCONT).
    public func resume() {
        state.withLock { $0.exited ? nil : $0.broker }?.signal(SIGCONT)
    }

    /// Makes the broker read its configuration again (SIGHUP): a changed `password_file` or
    /// `acl_file` applies from then on, to connections already open too.
    public func reload() {
        state.withLock { $0.exited ? nil : $0.broker }?.signal(SIGHUP)
    }

    /// Stops the broker (SIGKILL) without waiting; safe to call more than once.
    public func stop() {
        killNow()
    }

    /// The broker's log so far (all runs).
    public var log: [String] { state.withLock { $0.log } }

    /// Waits until the broker logs a line containing `text` (searching lines logged since the
    /// current run started, including ones already logged), or throws after `timeout`.
    public func waitForLog(_ text: String, timeout: Duration = .seconds(30)) async throws {
        try await waitForLog(timeout: timeout, where: { $0.contains(text) }, what: text)
    }

    /// Waits until the number of log lines of the current run containing `text` reaches `count`.
    public func waitForLog(_ text: String, count: Int, timeout: Duration = .seconds(30)) async throws {
        let seen = Mutex(0)
        let start = state.withLock { $0.logStartOfRun }
        let already = state.withLock { $0.log[start...].filter { $0.contains(text) }.count }
        if already >= count { return }
        seen.withLock { $0 = already }
        try await waitForLog(
            timeout: timeout, includeHistory: false,
            where: { line in
                guard line.contains(text) else { return false }
                return seen.withLock { value in
                    value += 1
                    return value >= count
                }
            }, what: "\(count)x \(text)")
    }

    private func waitForLog(
        timeout: Duration, includeHistory: Bool = true, where predicate: @escaping @Sendable (String) -> Bool, what: String
    ) async throws {
        let id = UUID()
        let timer = Task { [weak self] in
            await threadSleep(for: timeout)
            self?.failWaiter(id, BrokerError(description: "timed out after \(timeout) waiting for broker log '\(what)'"))
        }
        defer { timer.cancel() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let found: Bool = state.withLock { state in
                if includeHistory, state.log[state.logStartOfRun...].contains(where: predicate) { return true }
                state.waiters[id] = (predicate, continuation)
                return false
            }
            if found { continuation.resume() }
        }
    }

    private func failWaiter(_ id: UUID, _ error: any Error) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(throwing: error)
    }

    /// Waits until `mosquitto.db` holds `marker` (a client id, a retained payload), i.e. the
    /// broker has saved it and a SIGKILL will not lose it. mosquitto saves after changes but
    /// logs nothing about it, so this polls the file with a deadline.
    public func waitUntilPersisted(_ marker: String, timeout: Duration = .seconds(30)) async throws {
        guard options.persistent else { throw BrokerError(description: "broker runs without persistence") }
        let path = (options.persistenceDirectory ?? directory) + "/mosquitto.db"
        let needle = Data(marker.utf8)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let data = FileManager.default.contents(atPath: path), data.range(of: needle) != nil { return }
            await threadSleep(for: .milliseconds(20))
        }
        throw BrokerError(description: "'\(marker)' not saved to \(path) within \(timeout)")
    }

    // MARK: - Process handling

    private func writeConfig() throws -> String {
        var lines = [
            "# generated by AmpelTestSupport.MosquittoBroker",
            "per_listener_settings false",
            "listener \(port) \(host)",
        ]
        if let tls = options.tls, let tlsPort {
            lines += [
                "listener \(tlsPort) \(host)",
                "cafile \(tls.caFile)",
                "certfile \(tls.certFile)",
                "keyfile \(tls.keyFile)",
                "require_certificate \(tls.requireClientCertificate)",
            ]
        }
        if let passwordFile = options.passwordFile {
            lines += ["allow_anonymous false", "password_file \(passwordFile)"]
        } else {
            lines += ["allow_anonymous true"]
        }
        if options.persistent {
            let persistence = options.persistenceDirectory ?? directory
            lines += [
                "persistence true",
                "persistence_location \(persistence.hasSuffix("/") ? persistence : persistence + "/")",
                "autosave_on_changes true",
                "autosave_interval 1",
            ]
        } else {
            lines += ["persistence false"]
        }
        lines += [
            // Without these, QoS 1 traffic is silently dropped (1000 queued) or throttled (20 in
            // flight), and every QoS 1 round trip waits ~40 ms for Nagle + delayed ACK.
            "max_queued_messages \(options.maxQueuedMessages)",
            "max_inflight_messages \(options.maxInflightMessages)",
            "set_tcp_nodelay true",
            "log_dest stderr",
            "log_timestamp false",
            "connection_messages true",
        ]
        if options.verboseLog {
            lines += ["log_type all"]
        } else {
            lines += ["log_type error", "log_type warning", "log_type notice", "log_type information", "log_type subscribe"]
        }
        if getuid() == 0 {
            lines += ["user root"]  // otherwise mosquitto drops to user 'mosquitto' and cannot read our files
        }
        lines += options.extraConfig
        let path = directory + "/mosquitto.conf"
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func launch() async throws {
        guard state.withLock({ $0.exited }) else { throw BrokerError(description: "broker is already running") }
        let configPath = try writeConfig()
        let generation = state.withLock { state in
            state.generation += 1
            state.endsSeen = 0
            state.exited = false
            state.logStartOfRun = state.log.count
            state.partialLine = ""
            return state.generation
        }
        // The broker's output is read with blocking reads (no FileHandle.readabilityHandler, whose
        // libdispatch source crashed the test process after a kill and restart; see ChildProcess).
        // The run has ended when its output has ended and the process has been reaped.
        let broker: ChildProcess
        do {
            broker = try ChildProcess(
                Self.mosquittoPath, ["-c", configPath],
                output: .read { [weak self] data in
                    if data.isEmpty { self?.runEnded(generation) } else { self?.received(data) }
                },
                errors: .sameAsOutput,
                onExit: { [weak self] _ in self?.runEnded(generation) })
        } catch {
            state.withLock { $0.exited = true }
            throw BrokerError(description: "cannot run \(Self.mosquittoPath): \(error)")
        }
        state.withLock { state in
            if state.generation == generation, !state.exited { state.broker = broker }
        }
        startGuard(for: broker.pid)
        do {
            try await waitForLog(timeout: .seconds(15), where: { $0.contains(" running") || $0.contains("Error") }, what: "running")
        } catch {
            killNow()
            throw error
        }
        let started = state.withLock { state in
            state.log[state.logStartOfRun...].contains { $0.contains("mosquitto version") && $0.contains(" running") }
        }
        if !started {
            killNow()
            await waitForExit()
            throw BrokerError(description: "mosquitto failed to start:\n" + log.suffix(20).joined(separator: "\n"))
        }
    }

    /// See ``ChildProcess/guarding(_:)``.
    private func startGuard(for brokerPID: pid_t) {
        let watcher = ChildProcess.guarding(brokerPID)
        state.withLock { $0.guardProcess = watcher }
    }

    static let mosquittoPath: String = {
        for candidate in ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/usr/bin/mosquitto", "/opt/homebrew/sbin/mosquitto"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "mosquitto"
    }()

    private func received(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        var resumed: [CheckedContinuation<Void, any Error>] = []
        state.withLock { state in
            state.partialLine += text
            while let newline = state.partialLine.firstIndex(of: "\n") {
                let line = String(state.partialLine[..<newline])
                state.partialLine = String(state.partialLine[state.partialLine.index(after: newline)...])
                state.log.append(line)
                for (id, waiter) in state.waiters where waiter.predicate(line) {
                    state.waiters.removeValue(forKey: id)
                    resumed.append(waiter.continuation)
                }
            }
        }
        for continuation in resumed { continuation.resume() }
    }

    /// One of the two ends of a run (output ended, process reaped); the second one is the exit.
    private func runEnded(_ generation: Int) {
        let result: ([CheckedContinuation<Void, any Error>], [CheckedContinuation<Void, Never>])? =
            state.withLock { state in
                guard state.generation == generation, !state.exited else { return nil }
                state.endsSeen += 1
                guard state.endsSeen == 2 else { return nil }
                state.exited = true
                state.broker = nil
                let waiters = state.waiters.values.map(\.continuation)
                state.waiters.removeAll()
                let exitWaiters = state.exitWaiters
                state.exitWaiters = []
                state.log.append("[ampel] mosquitto exited")
                return (waiters, exitWaiters)
            }
        guard let (waiters, exitWaiters) = result else { return }
        for waiter in waiters {
            waiter.resume(throwing: BrokerError(description: "mosquitto exited:\n" + log.suffix(20).joined(separator: "\n")))
        }
        for waiter in exitWaiters { waiter.resume() }
        killNow()  // the guard, if the broker ended by itself
    }

    private func waitForExit() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state in
                if state.exited { return true }
                state.exitWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func killNow() {
        let (broker, watcher) = state.withLock { state in
            defer { state.guardProcess = nil }
            return (state.exited ? nil : state.broker, state.guardProcess)
        }
        // The guard first, so that closing its input cannot make it kill anything.
        watcher?.signal(SIGKILL)
        broker?.signal(SIGKILL)
        watcher?.closeInput()
    }

    // MARK: - Helpers

    /// Creates a `password_file` for `users` (name -> password) with `mosquitto_passwd`.
    public static func makePasswordFile(users: [String: String], in directory: String? = nil) async throws -> String {
        let dir = try directory ?? makeTemporaryDirectory(prefix: "ampel-mosquitto-passwd")
        let path = dir + "/passwd"
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        for (user, password) in users.sorted(by: { $0.key < $1.key }) {
            try await runTool("/usr/bin/mosquitto_passwd", ["-b", path, user, password])
        }
        return path
    }

    /// A fresh directory under the system temporary directory.
    public static func makeTemporaryDirectory(prefix: String) throws -> String {
        var base = NSTemporaryDirectory()
        while base.hasSuffix("/") { base.removeLast() }
        var template = Array((base + "/\(prefix)-XXXXXX").utf8CString)
        guard let result = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw BrokerError(description: "mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        return String(cString: result)
    }

    /// `count` free loopback ports, all different: the kernel may hand out a port again as soon
    /// as the probe that found it has closed it (a 3-node cluster once got the same port for one
    /// node's routes and another's MQTT listener, which then could not bind).
    public static func freeLoopbackPorts(_ count: Int) throws -> [Int] {
        var ports: [Int] = []
        while ports.count < count {
            let port = try freeLoopbackPort()
            if !ports.contains(port) { ports.append(port) }
        }
        return ports
    }

    /// A loopback port free when asked for (``RefusingPort`` keeps one).
    public static func freeLoopbackPort() throws -> Int {
        try RefusingPort().port
    }

    /// Runs a command-line tool to completion; throws with its output if it fails.
    @discardableResult
    public static func runTool(_ path: String, _ arguments: [String]) async throws -> String {
        let (status, output) = try await ChildProcess.run(path, arguments)
        guard status.exitCode == 0 else {
            throw BrokerError(description: "\(path) \(arguments.joined(separator: " ")) failed (\(status)):\n\(output)")
        }
        return output
    }
}

/// Sleeps on a thread of its own (`nanosleep`), not on a dispatch timer.
///
/// Under heavy parallel test load, `Task.sleep` was seen never to return on Linux (dispatch's
/// manager thread waiting without a timer armed), which turned every timeout into a hang.
/// Tests use this for their deadlines and for the few waits where time itself is the subject.
public func threadSleep(for duration: Duration) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let thread = Thread {
            var request = timespec(
                tv_sec: Int(duration.components.seconds), tv_nsec: Int(duration.components.attoseconds / 1_000_000_000))
            var remaining = timespec()
            while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
            continuation.resume()
        }
        thread.start()
    }
}

/// A loopback port that refuses every connection for as long as this value lives: bound and
/// never listening, so no other test's server can take it meanwhile. A port from
/// ``MosquittoBroker/freeLoopbackPort()`` is only free when asked for: beside the parallel
/// suites, Home Assistant once took one and answered a test's "unreachable" source with a 404.
public final class RefusingPort: Sendable {
    public let port: Int
    private let fd: Int32

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw MosquittoBroker.BrokerError(description: "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            close(fd)
            throw MosquittoBroker.BrokerError(description: "bind() or getsockname() failed")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
