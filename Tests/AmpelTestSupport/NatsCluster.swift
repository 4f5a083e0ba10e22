import Foundation
import Synchronization

/// A cluster of `nats-server` nodes (Debian `nats-server` 2.9) on loopback: each node speaks
/// MQTT 3.1.1 on a port of its own, keeps retained messages and sessions in JetStream, and
/// shares them with the others over the cluster routes. The clustered broker next to
/// ``MosquittoBroker``: the configuration is written by the test, the stores live in a
/// temporary directory, and every node goes when the cluster does.
///
/// ```swift
/// let cluster = try await NatsCluster.start()      // 3 nodes, returns when MQTT works on each
/// defer { cluster.stop() }
/// // ampel run --broker cluster.brokerList  (with mqtt.protocol: "3.1.1")
/// await cluster.nodes[0].kill()                    // SIGKILL
/// try await cluster.nodes[0].restart()             // same ports, same store
/// ```
///
/// nats-server needs a `server_name` per node and a cluster block with routes for JetStream to
/// form one cluster, and JetStream for MQTT. It creates the MQTT streams of an account when
/// the first MQTT client connects, which takes a second or two with three replicas: ``start(nodes:)``
/// connects once to each node (with `mosquitto_pub`) before it returns.
public final class NatsCluster: Sendable {
    /// One `nats-server` process of the cluster.
    public final class Node: Sendable {
        public let name: String
        public let host = "127.0.0.1"
        /// The MQTT listener.
        public let mqttPort: Int
        public var url: String { "mqtt://\(host):\(mqttPort)" }
        let configPath: String
        /// This run's log (standard error of nats-server), and the runs before it.
        private let log = Watched("")
        private let earlierRuns = Mutex("")
        /// The node and its guard (``ChildProcess/guarding(_:)``), nil when not running.
        private let running = Mutex<(node: ChildProcess, guard: ChildProcess?)?>(nil)
        private let exited = Watched(true)

        init(name: String, mqttPort: Int, configPath: String) {
            self.name = name
            self.mqttPort = mqttPort
            self.configPath = configPath
        }

        deinit { killNow() }

        public var logText: String { earlierRuns.withLock { $0 } + log.value }

        func launch() throws {
            guard exited.value else { throw NatsError(description: "\(name) is already running") }
            let previous = log.value
            earlierRuns.withLock { $0 += previous }
            log.update { $0 = "" }
            exited.update { $0 = false }
            let log = self.log
            let exited = self.exited
            let process = try ChildProcess(
                Self.path, ["-c", configPath], output: .discard,
                errors: .read { data in log.update { $0 += String(decoding: data, as: UTF8.self) } },
                onExit: { status in
                    log.update { $0 += "[ampel] nats-server exited: \(status)\n" }
                    exited.update { $0 = true }
                })
            running.withLock { $0 = (process, ChildProcess.guarding(process.pid)) }
        }

        /// Until this run's log contains `text`, or one of `alternatives` (or the node ended).
        public func waitForLog(_ text: String, or alternatives: [String] = [], timeout: Duration = .seconds(20)) async throws {
            let log = self.log
            let texts = [text] + alternatives
            try await withTimeout(timeout, "'\(text)' in the log of \(name)") {
                await log.wait { value in texts.contains { value.contains($0) } || value.contains("[ampel] nats-server exited") }
            }
            guard texts.contains(where: log.value.contains) else {
                throw NatsError(description: "\(name) ended before '\(text)':\n\(log.value.suffix(2000))")
            }
        }

        /// SIGKILL, and returns once the process is reaped.
        public func kill() async {
            killNow()
            let exited = self.exited
            _ = try? await withTimeout(.seconds(30), "\(name) to end") { await exited.wait { $0 } }
        }

        /// Starts the node again on the same ports and store; returns when it serves MQTT.
        public func restart() async throws {
            try launch()
            try await waitForLog("Server is ready")
        }

        func killNow() {
            guard let (node, watcher) = running.withLock({ state in defer { state = nil }; return state }) else { return }
            watcher?.signal(SIGKILL)
            node.signal(SIGKILL)
            watcher?.closeInput()
        }

        static let path: String = {
            for candidate in ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"]
            where FileManager.default.isExecutableFile(atPath: candidate) {
                return candidate
            }
            return "nats-server"
        }()
    }

    public struct NatsError: Error, CustomStringConvertible {
        public var description: String
    }

    public let nodes: [Node]
    /// Configuration files and JetStream stores.
    public let directory: String

    /// Every node's MQTT URL, comma-separated: `--broker` for a daemon that may use any of them.
    public var brokerList: String { nodes.map(\.url).joined(separator: ",") }

    private init(nodes: [Node], directory: String) {
        self.nodes = nodes
        self.directory = directory
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: Node.path) }

    /// Starts `count` nodes and returns once each has been reached by an MQTT client.
    public static func start(nodes count: Int = 3) async throws -> NatsCluster {
        // A free port can be taken by another test between probing and binding, and a node that
        // lost its route port leaves the others without a JetStream leader (seen: "connection
        // refused" on a route, no leader in 20 s, beside a second cluster starting): new ports then.
        var attempts = 0
        while true {
            attempts += 1
            do {
                return try await startOnce(nodes: count)
            } catch let error as NatsError where attempts < 3
                && (error.description.contains("address already in use") || error.description.contains("metadata leader")) {
                continue
            }
        }
    }

    private static func startOnce(nodes count: Int) async throws -> NatsCluster {
        let directory = try MosquittoBroker.makeTemporaryDirectory(prefix: "ampel-nats")
        let free = try MosquittoBroker.freeLoopbackPorts(3 * count)
        var ports: [(client: Int, route: Int, mqtt: Int)] = []
        for node in 0..<count {
            ports.append((client: free[3 * node], route: free[3 * node + 1], mqtt: free[3 * node + 2]))
        }
        var nodes: [Node] = []
        for (index, port) in ports.enumerated() {
            let name = "n\(index + 1)"
            let store = directory + "/" + name
            try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
            let routes = ports.enumerated().filter { $0.offset != index }.map { "nats-route://127.0.0.1:\($0.element.route)" }
            let config = """
                # generated by AmpelTestSupport.NatsCluster
                server_name: \(name)
                listen: 127.0.0.1:\(port.client)
                jetstream { store_dir: "\(store)" }
                cluster {
                  name: ampel-test
                  listen: 127.0.0.1:\(port.route)
                  routes: [\(routes.joined(separator: ", "))]
                }
                # Three replicas: nats-server counts the routes listed (here the two others) to
                # choose the MQTT streams' replicas, and two replicas stall when either node dies.
                mqtt { listen: 127.0.0.1:\(port.mqtt), stream_replicas: 3 }

                """
            let path = directory + "/\(name).conf"
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            nodes.append(Node(name: name, mqttPort: port.mqtt, configPath: path))
        }
        let cluster = NatsCluster(nodes: nodes, directory: directory)
        do {
            for node in nodes { try node.launch() }
            for node in nodes { try await node.waitForLog("Server is ready") }
            // JetStream elects its meta leader once the routes are up; MQTT needs it.
            // The leader itself logs that it became one; the others name it.
            for node in nodes {
                try await node.waitForLog("JetStream cluster new metadata leader", or: ["Self is new JetStream cluster metadata leader"])
            }
            for node in nodes { try await cluster.probe(node) }
        } catch {
            cluster.stop()
            throw NatsError(description: "\(error)\n" + nodes.map { "--- \($0.name)\n\($0.logText.suffix(1500))" }.joined(separator: "\n"))
        }
        return cluster
    }

    /// One MQTT 3.1.1 QoS 1 publish through `node`: returns once the node has taken it, which
    /// needs the account's MQTT streams in JetStream.
    public func probe(_ node: Node) async throws {
        try await withTimeout(.seconds(30), "an MQTT publish through \(node.name)") {
            try await MosquittoBroker.runTool(
                "/usr/bin/mosquitto_pub",
                ["-V", "mqttv311", "-h", node.host, "-p", "\(node.mqttPort)", "-q", "1", "-t", "ampel-test/probe/\(node.name)", "-m", "x"])
        }
    }

    /// Stops every node (SIGKILL: the stores are thrown away with the directory).
    public func stop() {
        for node in nodes { node.killNow() }
    }
}
