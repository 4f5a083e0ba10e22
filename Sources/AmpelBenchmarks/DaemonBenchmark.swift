import AmpelMessages
import AmpelMQTT
import Foundation
import Synchronization

/// The daemon benchmark (issue 6): location messages through `ampel run` against a
/// do-nothing relay through the same broker, latency location-to-state, RSS with many devices.
///
/// Run via `Benchmarks/daemon/run.sh`, which starts the broker, the daemon and the relay. Modes:
///
///     AmpelBenchmarks daemon relay --port P
///         The baseline: subscribes to `bench/relay/in/+` (QoS 1) and republishes each message
///         unchanged to `bench/relay/out/<key>/state`, QoS 1, retained, as the daemon does
///         with a state. Prints `relay ready` once subscribed; runs until killed.
///     AmpelBenchmarks daemon throughput --port P --target daemon|relay --qos 0|1
///                                       [--devices 5000] [--count 50000] [--window 500]
///         Sends one fix per device first (so no alert or discovery is measured), then `count`
///         fixes round-robin over the devices, keeping at most `window` fixes whose state has
///         not come back; prints the rate of states received.
///     AmpelBenchmarks daemon latency --port P --target daemon|relay --qos 0|1
///                                    [--rate 1000] [--seconds 10]
///         Steady `rate` fixes per second, one per (pre-warmed) device; prints p50/p99/max from
///         the publish call to the state's arrival.
///     Cluster options (throughput, latency): [--protocol 3.1.1] for nats-server,
///         [--observe-port P2] to read the states on another node than the one fixes go to,
///         [--partitions N] to spread the devices over `ampel/location/part<n>/<key>` for N
///         partitioned daemons (Benchmarks/cluster/run.sh).
///     AmpelBenchmarks daemon rss --port P --pid PID [--devices 100000] [--window 500] [--settle 10]
///         One fix each for `devices` new devices all over Bavaria, waits for all their states,
///         prints VmRSS/VmHWM of process PID.
///
/// Every result is one line of `key=value` fields, read by run.sh.
enum DaemonBenchmark {
    static func main(_ arguments: [String]) async {
        guard let mode = arguments.first else { usage() }
        let options = parseOptions(Array(arguments.dropFirst()))
        guard let port = options["port"].flatMap({ Int($0) }) else { usage() }
        let host = options["host"] ?? "127.0.0.1"
        do {
            switch mode {
            case "relay":
                try await DaemonRelay.run(host: host, port: port)
            case "throughput", "latency", "rss":
                let target = Target(rawValue: options["target"] ?? "daemon") ?? .daemon
                let qos = MQTTQoS(rawValue: Int(options["qos"] ?? "1") ?? 1) ?? .atLeastOnce
                var load = DaemonLoad(host: host, port: port, target: target, qos: qos)
                // A cluster: nats-server speaks 3.1.1 only; fixes in through one node, states read on another.
                if options["protocol"] == "3.1.1" { load.protocolVersion = .v311 }
                load.observePort = options["observe-port"].flatMap { Int($0) }
                load.partitions = int(options, "partitions", 1)
                let line: String
                switch mode {
                case "throughput":
                    line = try await load.throughput(
                        devices: int(options, "devices", 5_000), count: int(options, "count", 50_000),
                        window: int(options, "window", 500))
                case "latency":
                    line = try await load.latency(rate: int(options, "rate", 1_000), seconds: int(options, "seconds", 10))
                default:
                    guard let pid = options["pid"].flatMap({ Int32($0) }) else { usage() }
                    line = try await load.rss(pid: pid, devices: int(options, "devices", 100_000), window: int(options, "window", 500),
                                              settle: int(options, "settle", 10))
                }
                print(line)
            default:
                usage()
            }
        } catch {
            print("error: \(error)")
            exit(1)
        }
    }

    static func usage() -> Never {
        print("usage: AmpelBenchmarks daemon relay|throughput|latency|rss --port P [options]; see DaemonBenchmark.swift")
        exit(2)
    }

    static func parseOptions(_ arguments: [String]) -> [String: String] {
        var options: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let key = arguments[index]
            if key.hasPrefix("--"), index + 1 < arguments.count {
                options[String(key.dropFirst(2))] = arguments[index + 1]
                index += 2
            } else {
                index += 1
            }
        }
        return options
    }

    static func int(_ options: [String: String], _ key: String, _ fallback: Int) -> Int {
        options[key].flatMap { Int($0) } ?? fallback
    }
}

/// Where the load goes: the daemon's plain-JSON input, or the relay's.
enum Target: String, Sendable {
    case daemon, relay

    func inputTopic(_ key: String) -> String {
        self == .daemon ? "ampel/location/\(key)" : "bench/relay/in/\(key)"
    }

    var outputFilter: String {
        self == .daemon ? "ampel/device/+/state" : "bench/relay/out/+/state"
    }

    /// The device key in an output topic (`<prefix>/<key>/state`, key one level).
    func key(ofOutput topic: String) -> Substring? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        let expected = self == .daemon ? 4 : 5
        guard levels.count == expected, levels.last == "state" else { return nil }
        return levels[expected - 2]
    }
}

/// Counts fixes in flight (sent, state not yet seen) and suspends the sender while `limit` are.
final class InFlightWindow: Sendable {
    private struct State {
        var outstanding = 0
        var senders: [CheckedContinuation<Void, Never>] = []
        var drainer: CheckedContinuation<Bool, Never>?
        var failed = false
    }

    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Returns once one more fix may be sent, and counts it.
    func acquire() async {
        while true {
            let admitted = state.withLock { state -> Bool in
                if state.outstanding < limit || state.failed {
                    state.outstanding += 1
                    return true
                }
                return false
            }
            if admitted { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.outstanding < limit || state.failed { return true }
                    state.senders.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    /// One state came back.
    func release() {
        typealias Wake = ([CheckedContinuation<Void, Never>], CheckedContinuation<Bool, Never>?)
        let (senders, drainer) = state.withLock { state -> Wake in
            state.outstanding -= 1
            var senders: [CheckedContinuation<Void, Never>] = []
            var drainer: CheckedContinuation<Bool, Never>?
            // Wake the senders at half the window: fewer wake-ups, the pipe stays full.
            if state.outstanding <= limit / 2, !state.senders.isEmpty { swap(&senders, &state.senders) }
            if state.outstanding <= 0 { drainer = state.drainer; state.drainer = nil }
            return (senders, drainer)
        }
        for sender in senders { sender.resume() }
        drainer?.resume(returning: true)
    }

    /// Returns true once every counted fix has come back, false if `fail()` came first.
    func drain() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let result = state.withLock { state -> Bool? in
                if state.outstanding <= 0 { return true }
                if state.failed { return false }
                state.drainer = continuation
                return nil
            }
            if let result { continuation.resume(returning: result) }
        }
    }

    /// Gives up (a timeout): wakes everyone waiting.
    func fail() {
        let (senders, drainer) = state.withLock { state in
            state.failed = true
            let taken = (state.senders, state.drainer)
            state.senders = []
            state.drainer = nil
            return taken
        }
        for sender in senders { sender.resume() }
        drainer?.resume(returning: false)
    }

    var outstanding: Int { state.withLock { $0.outstanding } }
}

/// Reads `VmRSS` and `VmHWM` (kB) of a process from `/proc/<pid>/status`.
func memoryOfProcess(_ pid: Int32) -> (rssKB: Int, peakKB: Int)? {
    // /proc files report size 0, so read them line by line with stdio, not by size.
    guard let file = fopen("/proc/\(pid)/status", "r") else { return nil }
    defer { fclose(file) }
    var rss: Int?
    var peak: Int?
    var buffer = [CChar](repeating: 0, count: 512)
    while fgets(&buffer, Int32(buffer.count), file) != nil {
        let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
        guard parts.count >= 2 else { continue }
        if parts[0] == "VmRSS:" { rss = Int(parts[1]) }
        if parts[0] == "VmHWM:" { peak = Int(parts[1]) }
    }
    guard let rss, let peak else { return nil }
    return (rss, peak)
}
