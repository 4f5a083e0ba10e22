import AmpelMessages
import AmpelMQTT
// `timespec` belongs to CDispatch once AmpelDaemon (through swift-nio) is linked in.
import CDispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Publish and receive throughput of ``MQTTClient`` through one broker.
///
/// Does the same work as the C baseline `Benchmarks/mqtt/mqtt_bench.c`: one subscriber and one
/// publisher client in one process, MQTT 5, 100 messages in flight each way; the publisher
/// sends `count` messages of `size` bytes at the given QoS to a topic the subscriber holds at
/// the same QoS. QoS 1 publishes run as 1000 concurrent tasks, each awaiting its PUBACK: with a
/// send maximum of 100, libmosquitto then always holds queued messages that its network thread
/// releases on each PUBACK by itself, as the C client's queue does, instead of waiting for a
/// Swift task to be woken and publish the next one.
///
///     AmpelBenchmarks mqtt <host> <port> <qos> <count> <size> <tag> [stream|handler|enqueue] [normal]
///
/// The subscriber receives through ``MQTTClient/messages`` (`stream`, the default: a Swift task
/// consumes an `AsyncSequence`, woken per message when it keeps up) or through a message
/// handler (`handler`: counted on the network thread, as the C client counts in its callback).
/// Both run in the same process as the publisher and share the two cores with it. `normal`
/// runs both clients' network threads in the normal scheduling class instead of the default
/// SCHED_BATCH (``MQTTConfiguration/NetworkThreadPolicy``), to show what that choice is worth.
///
/// Prints one line: `impl=swift|swift-handler qos=.. count=.. size=.. publish_s=.. publish_rate=.. receive_s=.. receive_rate=..
/// publish_cpu_us=..` (the last: CPU time of the publishing thread per call, QoS 0 only).
enum MQTTBenchmark {
    static func main(_ arguments: [String]) async {
        guard (6...8).contains(arguments.count), let port = Int(arguments[1]), let qosValue = Int(arguments[2]),
            let qos = MQTTQoS(rawValue: qosValue), let count = Int(arguments[3]), count > 0, let size = Int(arguments[4]),
            arguments.count == 6 || ["stream", "handler", "enqueue"].contains(arguments[6]),
            arguments.count < 8 || arguments[7] == "normal"
        else {
            print("usage: AmpelBenchmarks mqtt <host> <port> <qos 0|1> <count> <size> <tag> [stream|handler|enqueue] [normal]")
            exit(2)
        }
        do {
            let result = try await run(host: arguments[0], port: port, qos: qos, count: count, size: size, tag: arguments[5],
                                       handler: arguments.count >= 7 && arguments[6] != "stream",
                                       enqueue: arguments.count >= 7 && arguments[6] == "enqueue",
                                       policy: arguments.count == 8 ? .normal : .batch)
            print(result)
        } catch {
            print("error: \(error)")
            exit(1)
        }
    }

    static func run(
        host: String, port: Int, qos: MQTTQoS, count: Int, size: Int, tag: String, handler: Bool, enqueue: Bool,
        policy: MQTTConfiguration.NetworkThreadPolicy
    ) async throws -> String {
        let topic = "bench/swift/\(tag)"
        func configuration(_ role: String) -> MQTTConfiguration {
            var configuration = MQTTConfiguration(host: host, port: port, clientID: "bench-swift-\(role)-\(tag)")
            configuration.maxInflight = 100
            configuration.receiveMaximum = 100
            // Room for every message: the benchmark measures throughput, not the overflow policy.
            configuration.incomingBufferSize = count
            configuration.networkThreadPolicy = policy
            return configuration
        }
        // Handler mode: the network thread counts and signals the last message.
        let (done, finished) = AsyncStream<Void>.makeStream()
        let handled = Counter()
        let subscriber = handler
            ? MQTTClient(configuration: configuration("sub")) { message in
                if handled.increment(firstByte: message.payload.first ?? 0) == count { finished.yield() }
            }
            : MQTTClient(configuration: configuration("sub"))
        let publisher = MQTTClient(configuration: configuration("pub"))
        try await subscriber.connect()
        try await publisher.connect()
        try await subscriber.subscribe([(topic, qos)])

        let clock = ContinuousClock()
        let receiver = Task {
            if handler {
                for await _ in done { break }
                return (clock.now, handled.count)
            }
            var received = 0
            var firstByteSum = 0
            for await message in subscriber.messages {
                firstByteSum &+= Int(message.payload.first ?? 0)  // touch the payload like a consumer would
                received += 1
                if received == count { break }
            }
            blackHole(firstByteSum)
            return (clock.now, received)
        }
        let payload = (0..<size).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        let start = clock.now
        let publishCPU = try await publishAll(publisher, topic: topic, payload: payload, qos: qos, count: count, enqueue: enqueue)
        let published = clock.now
        let timeout = Task {
            try await Task.sleep(for: .seconds(120))
            receiver.cancel()
        }
        let (receivedAt, received) = await receiver.value
        timeout.cancel()
        guard received == count else {
            throw MQTTError(code: .timeout, message: "received \(received) of \(count) (dropped \(subscriber.counters.droppedOnOverflow))")
        }
        await publisher.disconnect()
        await subscriber.disconnect()

        let publishSeconds = seconds(published - start)
        let receiveSeconds = seconds(receivedAt - start)
        let impl = (enqueue ? "swift-enqueue" : handler ? "swift-handler" : "swift") + (policy == .normal ? "-normal" : "")
        return "impl=\(impl) qos=\(qos.rawValue) count=\(count) size=\(size) "
            + "publish_s=\(format(publishSeconds, 4)) publish_rate=\(format(Double(count) / publishSeconds, 0)) "
            + "receive_s=\(format(receiveSeconds, 4)) receive_rate=\(format(Double(count) / receiveSeconds, 0)) "
            + "publish_cpu_us=\(publishCPU.isNaN ? "nan" : format(publishCPU, 3))"
    }

    /// Publishes `count` messages the way the mode says; returns the publishing thread's CPU
    /// microseconds per message at QoS 0 (NaN otherwise: QoS 1 publishes run on many threads).
    static func publishAll(_ publisher: MQTTClient, topic: String, payload: [UInt8], qos: MQTTQoS, count: Int,
                           enqueue: Bool) async throws -> Double {
        var publishCPU = Double.nan
        if qos == .atMostOnce {
            // No call suspends at QoS 0, so the loop stays on one thread; checked, not assumed.
            let thread = pthread_self()
            let cpuStart = threadCPUSeconds()
            for _ in 0..<count {
                try await publisher.publish(topic: topic, payload: payload, qos: .atMostOnce)
            }
            if pthread_equal(thread, pthread_self()) != 0 { publishCPU = (threadCPUSeconds() - cpuStart) * 1e6 / Double(count) }
        } else if enqueue {
            // As the C client does: everything handed to libmosquitto at once (`enqueue` does not
            // wait), which sends up to the send maximum and the rest as PUBACKs come back. The
            // last one is awaited: the broker acknowledges in order, so its PUBACK comes last.
            for _ in 1..<count {
                try publisher.enqueue(topic: topic, payload: payload, qos: qos)
            }
            // (The receive count below checks that all of them arrived.)
            try await publisher.publish(topic: topic, payload: payload, qos: qos)
        } else {
            let lanes = 1000
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<lanes {
                    let share = count / lanes + (lane < count % lanes ? 1 : 0)
                    group.addTask {
                        for _ in 0..<share {
                            try await publisher.publish(topic: topic, payload: payload, qos: qos)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        return publishCPU
    }

    /// CPU time the calling thread has used.
    private static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Messages counted on the network thread (handler mode).
    final class Counter: Sendable {
        private let state = Mutex<(count: Int, firstByteSum: Int)>((0, 0))
        func increment(firstByte: UInt8) -> Int {
            state.withLock { state in
                state.count += 1
                state.firstByteSum &+= Int(firstByte)  // touch the payload like a consumer would
                return state.count
            }
        }
        var count: Int { state.withLock { $0.count } }
    }

    @inline(never)
    private static func blackHole(_ value: Int) {
        if value == -1 { print("") }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private static func format(_ value: Double, _ decimals: Int) -> String {
        let factor = pow(10.0, Double(decimals))
        let rounded = (value * factor).rounded() / factor
        return decimals == 0 ? String(Int(rounded)) : String(rounded)
    }
}
