import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A RabbitMQ node (Debian `rabbitmq-server` 3.10) with its `rabbitmq_mqtt` plugin for one
/// test, on free loopback ports, run as the current user: the broker family beside
/// ``MosquittoBroker`` and ``NatsCluster`` (docs/deploy.md, "RabbitMQ as the broker").
///
/// ```swift
/// let broker = try await RabbitMQBroker.start()   // 10-15 s: returns once MQTT works
/// defer { broker.stop() }
/// try await broker.rabbitmqctl(["add_user", "ampel", "secret"])
/// // mosquitto_pub broker.toolOptions + ["-t", ...]   (MQTT 3.1.1, the test's own user)
/// let leftovers = await broker.stopAndWait()        // [] once beam, epmd and helpers are gone
/// ```
///
/// Everything the node writes lives in a temporary directory: the configuration, the
/// `enabled_plugins` file, the Mnesia database with the retained message store, the Erlang
/// cookie (`HOME`). Debian's `/usr/sbin/rabbitmq-server` is a wrapper that switches to the
/// `rabbitmq` user and `/var/lib/rabbitmq`; the scripts behind it, in `/usr/lib/rabbitmq/bin`,
/// run as whoever starts them and take every path from the environment set here.
///
/// The node runs in a process group of its own (`setsid`), with an `epmd` of its own on a
/// free port started first in the same group: Erlang would otherwise start one with
/// `epmd -daemon`, which leaves the group and outlives the node. Beam's helpers
/// (`erl_child_setup`, `inet_gethost`, the disk monitor's `sh`) make sessions of their own and
/// end when beam does; ``stopAndWait()`` waits for them too. A guard process SIGKILLs the group
/// when the test process ends without a stop, even by crashing.
public final class RabbitMQBroker: Sendable {
    public struct Options: Sendable {
        /// `mqtt.retained_message_store`: the plugin's default keeps retained messages on disk
        /// (`rabbit_mqtt_retained_msg_store_dets`); `..._ets` in memory only, `..._noop` none.
        public var retainedStore: String
        /// Raw lines appended to `rabbitmq.conf`.
        public var extraConfig: [String]

        public init(retainedStore: String = "rabbit_mqtt_retained_msg_store_dets", extraConfig: [String] = []) {
            self.retainedStore = retainedStore
            self.extraConfig = extraConfig
        }
    }

    public struct RabbitError: Error, CustomStringConvertible {
        public var description: String
    }

    public let host = "127.0.0.1"
    public let mqttPort: Int
    /// `mqtt://127.0.0.1:<mqttPort>`.
    public var url: String { "mqtt://\(host):\(mqttPort)" }
    /// The virtual host MQTT clients land in (`mqtt.vhost`); the node has no other.
    public let vhost = "ampel"
    /// A user with every right on ``vhost``, created at the node's first boot
    /// (`default_user`): the tests' `mosquitto_pub` and `mosquitto_sub`.
    public let toolUser = "ampel-test"
    public let toolPassword = "ampel-test-secret"
    /// `mosquitto_pub`/`mosquitto_sub` options for this node: MQTT 3.1.1 (the plugin of 3.10
    /// speaks nothing newer) and ``toolUser``; host and port are given separately.
    public var toolOptions: [String] { ["-V", "mqttv311", "-u", toolUser, "-P", toolPassword] }
    /// Erlang node name, configuration, database and logs.
    public let directory: String
    public let nodeName: String
    public let options: Options
    private let epmdPort: Int

    private struct Running {
        var node: ChildProcess
        var guardProcess: ChildProcess?
    }
    private let running = Mutex<Running?>(nil)
    /// The node's console output (`RABBITMQ_LOGS=-`), standard error included.
    private let log = Watched("")
    private let exited = Watched(false)

    private init(directory: String, mqttPort: Int, nodePort: Int, distPort: Int, epmdPort: Int, options: Options) {
        self.directory = directory
        self.mqttPort = mqttPort
        self.epmdPort = epmdPort
        self.options = options
        nodeName = "ampel-test-\(mqttPort)@localhost"
        environment = [
            "HOME": directory + "/home",
            "RABBITMQ_NODENAME": nodeName,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": "\(nodePort)",
            "RABBITMQ_DIST_PORT": "\(distPort)",
            "ERL_EPMD_PORT": "\(epmdPort)",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_CONFIG_FILE": directory + "/rabbitmq.conf",
            // None of the machine's own files: /etc/rabbitmq/{rabbitmq-env.conf,advanced.config}.
            "RABBITMQ_CONF_ENV_FILE": directory + "/rabbitmq-env.conf",
            "RABBITMQ_ADVANCED_CONFIG_FILE": directory + "/advanced.config",
            "RABBITMQ_ENABLED_PLUGINS_FILE": directory + "/enabled_plugins",
            "RABBITMQ_MNESIA_BASE": directory + "/mnesia",
            "RABBITMQ_LOG_BASE": directory + "/log",
            "RABBITMQ_PID_FILE": directory + "/rabbit.pid",
            // The log on standard output, where the start is awaited.
            "RABBITMQ_LOGS": "-",
        ]
    }

    /// What the server scripts and the CLI tools read (the same cookie, node and epmd).
    private let environment: [String: String]

    deinit {
        killNow()
        try? FileManager.default.removeItem(atPath: directory)
    }

    static let binDirectory = "/usr/lib/rabbitmq/bin"

    /// Whether Debian's `rabbitmq-server` is installed (scripts/install-deps.sh installs it).
    public static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: binDirectory + "/rabbitmq-server")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/epmd")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/setsid")
    }

    /// The installed version (`3.10.8-1.1+deb12u1`), from dpkg; nil when unknown.
    public static var installedVersion: String? {
        let status = (try? String(contentsOfFile: "/var/lib/dpkg/status", encoding: .utf8)) ?? ""
        guard let entry = status.components(separatedBy: "\n\n").first(where: { $0.hasPrefix("Package: rabbitmq-server\n") }),
              let line = entry.split(separator: "\n").first(where: { $0.hasPrefix("Version: ") }) else { return nil }
        return String(line.dropFirst("Version: ".count))
    }

    /// The node's console log so far.
    public var logText: String { log.value }

    /// Starts a node and returns once its MQTT listener has taken a publish.
    public static func start(_ options: Options = Options()) async throws -> RabbitMQBroker {
        // A free port can be taken by another test between probing and binding: new ports then.
        var attempt = 0
        while true {
            attempt += 1
            let ports = try MosquittoBroker.freeLoopbackPorts(4)
            let directory = try MosquittoBroker.makeTemporaryDirectory(prefix: "ampel-rabbitmq")
            let broker = RabbitMQBroker(
                directory: directory, mqttPort: ports[0], nodePort: ports[1], distPort: ports[2], epmdPort: ports[3], options: options)
            do {
                try await broker.launch()
                return broker
            } catch let error as RabbitError where attempt < 3 && error.description.contains("eaddrinuse") {
                _ = await broker.stopAndWait()
                continue
            } catch {
                _ = await broker.stopAndWait()
                throw error
            }
        }
    }

    private func launch() async throws {
        let fileManager = FileManager.default
        for sub in ["home", "mnesia", "log"] {
            try fileManager.createDirectory(atPath: directory + "/" + sub, withIntermediateDirectories: true)
        }
        let config = [
            "# generated by AmpelTestSupport.RabbitMQBroker",
            "listeners.tcp.default = 127.0.0.1:\(environment["RABBITMQ_NODE_PORT"]!)",
            "mqtt.listeners.tcp.default = 127.0.0.1:\(mqttPort)",
            // The first boot creates this vhost and user (instead of `/` and guest).
            "default_vhost = \(vhost)",
            "default_user = \(toolUser)",
            "default_pass = \(toolPassword)",
            "mqtt.vhost = \(vhost)",
            "mqtt.allow_anonymous = false",
            "mqtt.retained_message_store = \(options.retainedStore)",
            // A shared test machine's disk may be fuller than the default 50 MB free limit allows.
            "disk_free_limit.absolute = 1MB",
        ] + options.extraConfig
        try (config.joined(separator: "\n") + "\n").write(toFile: directory + "/rabbitmq.conf", atomically: true, encoding: .utf8)
        try "[rabbitmq_mqtt].\n".write(toFile: directory + "/enabled_plugins", atomically: true, encoding: .utf8)
        try "".write(toFile: directory + "/rabbitmq-env.conf", atomically: true, encoding: .utf8)

        // epmd first, in the node's group, listening before the node asks for it (at most 10 s).
        let script = """
            epmd -port "$ERL_EPMD_PORT" -address 127.0.0.1 &
            i=0
            until epmd -port "$ERL_EPMD_PORT" -names >/dev/null 2>&1; do
              i=$((i + 1)); [ "$i" -gt 200 ] && { echo "[ampel] epmd did not start on $ERL_EPMD_PORT" >&2; exit 1; }
              sleep 0.05
            done
            exec \(Self.binDirectory)/rabbitmq-server
            """
        let log = self.log
        let exited = self.exited
        let settings = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        // env sets the variables and execs setsid, which (the child is no group leader) makes
        // the process a session and group leader without a fork: the group's id is its pid.
        let node = try ChildProcess(
            "/usr/bin/env", settings + ["/usr/bin/setsid", "/bin/sh", "-c", script],
            output: .read { data in log.update { $0 += String(decoding: data, as: UTF8.self) } }, errors: .sameAsOutput,
            onExit: { status in
                log.update { $0 += "[ampel] rabbitmq-server exited: \(status)\n" }
                exited.update { $0 = true }
            })
        let guardProcess = try? ChildProcess(
            "/bin/sh", ["-c", "read -r _; kill -9 -- -\"$1\" 2>/dev/null", "ampel-rabbitmq-guard", "\(node.pid)"],
            inputPipe: true, output: .discard, errors: .discard, onExit: { _ in })
        running.withLock { $0 = Running(node: node, guardProcess: guardProcess) }

        // Boot, Mnesia, the plugin's Raft member for client ids (it waits 6 s for peers that a
        // single node never has), the listeners: 10-15 s here, more on a loaded machine.
        do {
            try await withTimeout(.seconds(90), "RabbitMQ's start ('Server startup complete')") {
                await log.wait { $0.contains("Server startup complete") || $0.contains("[ampel] rabbitmq-server exited") }
            }
        } catch {
            throw RabbitError(description: "\(error)\n\(log.value.suffix(3000))")
        }
        let text = log.value
        guard text.contains("Server startup complete") else {
            throw RabbitError(description: "rabbitmq-server ended during its start:\n\(text.suffix(3000))")
        }
        guard text.contains("started MQTT TCP listener on 127.0.0.1:\(mqttPort)") else {
            throw RabbitError(description: "no MQTT listener on \(mqttPort):\n\(text.suffix(3000))")
        }
        do {
            try await withTimeout(.seconds(30), "an MQTT publish to RabbitMQ") {
                try await MosquittoBroker.runTool(
                    "/usr/bin/mosquitto_pub",
                    self.toolOptions + ["-h", self.host, "-p", "\(self.mqttPort)", "-q", "1", "-t", "ampel-test/probe", "-m", "x"])
            }
        } catch {
            throw RabbitError(description: "\(error)\n\(log.value.suffix(3000))")
        }
    }

    /// Runs `rabbitmqctl` against the node (`-q`), returning its output; throws when it fails.
    @discardableResult
    public func rabbitmqctl(_ arguments: [String]) async throws -> String {
        let settings = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        // An Erlang VM boots for each call: beside CI's parallel suites that took over a minute.
        return try await withTimeout(.seconds(180), "rabbitmqctl \(arguments.first ?? "")") {
            try await MosquittoBroker.runTool("/usr/bin/env", settings + [Self.binDirectory + "/rabbitmqctl", "-q", "-n", self.nodeName] + arguments)
        }
    }

    /// SIGKILLs the node's process group without waiting; safe to call more than once.
    public func stop() {
        killNow()
    }

    /// SIGKILLs the node's group and every process the node started, then waits (at most 20 s)
    /// until none is left. Returns the ones still running then (`pid command`): none, normally.
    public func stopAndWait() async -> [String] {
        let started = running.withLock { $0?.node.pid }
        let family = started.map(Self.descendants(of:)) ?? []
        killNow()
        // The helpers in sessions of their own end when beam does; a SIGKILL makes sure of it.
        for (pid, _) in family { _ = kill(pid, SIGKILL) }
        let exited = self.exited
        _ = try? await withTimeout(.seconds(20), "rabbitmq-server to be reaped") { await exited.wait { $0 } }
        var left: [String] = []
        for _ in 0..<200 {
            left = family.compactMap { pid, command in Self.isAlive(pid) ? "\(pid) \(command)" : nil }
            if left.isEmpty { break }
            // Processes outside this one's children: nothing to be woken by, so a short poll.
            await threadSleep(for: .milliseconds(100))
        }
        return left
    }

    private func killNow() {
        guard let current = running.withLock({ state in defer { state = nil }; return state }) else { return }
        current.guardProcess?.signal(SIGKILL)
        if current.node.isRunning { _ = kill(-current.node.pid, SIGKILL) }
        current.node.signal(SIGKILL)
        current.guardProcess?.closeInput()
    }

    /// `pid` and every process below it (pid, command), read from /proc.
    static func descendants(of pid: pid_t) -> [(pid_t, String)] {
        var children: [pid_t: [pid_t]] = [:]
        var commands: [pid_t: String] = [:]
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let child = pid_t(entry), let stat = procStat(child) else { continue }
            children[stat.parent, default: []].append(child)
            commands[child] = stat.command
        }
        var result: [(pid_t, String)] = []
        var queue = [pid]
        while let next = queue.popLast() {
            result.append((next, commands[next] ?? "?"))
            queue += children[next] ?? []
        }
        return result
    }

    /// Whether `pid` runs (a zombie waiting for its parent to reap it does not).
    static func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = procStat(pid) else { return false }
        return stat.state != "Z" && stat.state != "X"
    }

    /// Command, state and parent of `pid` from `/proc/<pid>/stat` (the command, in
    /// parentheses, may itself hold spaces and parentheses: the fields follow the last `)`).
    static func procStat(_ pid: pid_t) -> (command: String, state: Character, parent: pid_t)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 2, let state = fields[0].first, let parent = pid_t(fields[1]) else { return nil }
        return (String(text[text.index(after: open)..<close]), state, parent)
    }
}
