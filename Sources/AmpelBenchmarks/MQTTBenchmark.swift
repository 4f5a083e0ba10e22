import AmpelMQTT

#if canImport(Glibc)
import Glibc
#endif

/// Publish and receive throughput of ``MQTTClient`` through one broker.
///
/// Does the same work as the C baseline `Benchmarks/mqtt/mqtt_bench.c`: one subscriber and one
/// publisher client in one process, MQTT 5, 100 messages in flight each way; the publisher
/// sends `count` messages of `size` bytes at the given QoS to a topic the subscriber holds at
/// the same QoS. QoS 1 publishes run as 100 concurrent tasks (the send maximum), each awaiting
/// its PUBACK, which is how a caller keeps the pipe full with an API that returns on PUBACK.
///
///     AmpelBenchmarks mqtt <host> <port> <qos> <count> <size> <tag>
///
/// Prints one line: `impl=swift qos=.. count=.. size=.. publish_s=.. publish_rate=.. receive_s=.. receive_rate=..`
enum MQTTBenchmark {
    static func main(_ arguments: [String]) async {
        guard arguments.count == 6, let port = Int(arguments[1]), let qosValue = Int(arguments[2]),
            let qos = MQTTQoS(rawValue: qosValue), let count = Int(arguments[3]), count > 0, let size = Int(arguments[4])
        else {
            print("usage: AmpelBenchmarks mqtt <host> <port> <qos 0|1> <count> <size> <tag>")
            exit(2)
        }
        do {
            let result = try await run(host: arguments[0], port: port, qos: qos, count: count, size: size, tag: arguments[5])
            print(result)
        } catch {
            print("error: \(error)")
            exit(1)
        }
    }

    static func run(host: String, port: Int, qos: MQTTQoS, count: Int, size: Int, tag: String) async throws -> String {
        let topic = "bench/swift/\(tag)"
        func configuration(_ role: String) -> MQTTConfiguration {
            var configuration = MQTTConfiguration(host: host, port: port, clientID: "bench-swift-\(role)-\(tag)")
            configuration.maxInflight = 100
            configuration.receiveMaximum = 100
            // Room for every message: the benchmark measures throughput, not the overflow policy.
            configuration.incomingBufferSize = count
            return configuration
        }
        let subscriber = MQTTClient(configuration: configuration("sub"))
        let publisher = MQTTClient(configuration: configuration("pub"))
        try await subscriber.connect()
        try await publisher.connect()
        try await subscriber.subscribe([(topic, qos)])

        let clock = ContinuousClock()
        let receiver = Task {
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
        if qos == .atMostOnce {
            for _ in 0..<count {
                try await publisher.publish(topic: topic, payload: payload, qos: .atMostOnce)
            }
        } else {
            let lanes = 100
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
        return "impl=swift qos=\(qos.rawValue) count=\(count) size=\(size) "
            + "publish_s=\(format(publishSeconds, 4)) publish_rate=\(format(Double(count) / publishSeconds, 0)) "
            + "receive_s=\(format(receiveSeconds, 4)) receive_rate=\(format(Double(count) / receiveSeconds, 0))"
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
