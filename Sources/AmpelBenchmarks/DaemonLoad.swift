import AmpelMessages
import AmpelMQTT
import Foundation
import Synchronization

/// Load generator and observer for the daemon benchmark: publishes plain JSON fixes
/// (`{"lat","lon","tst"}`) and watches the state topics come back, through one broker.
struct DaemonLoad: Sendable {
    let host: String
    let port: Int
    let target: Target
    let qos: MQTTQoS
    /// `.v311` for nats-server, which speaks nothing else.
    var protocolVersion: MQTTConfiguration.ProtocolVersion = .v5
    /// Where the observer reads the states (another node of a cluster); nil: `port`.
    var observePort: Int?
    /// Partitioned daemons: device keys are spread over `ampel/location/part<n>/<key>`, n < this.
    var partitions = 1

    /// The input topic of `key`: the target's, or with ``partitions`` one partition's.
    func inputTopic(_ key: String) -> String {
        guard target == .daemon, partitions > 1 else { return target.inputTopic(key) }
        return "ampel/location/part\(key.utf8.reduce(0) { $0 &+ Int($1) } % partitions)/\(key)"
    }

    /// Town centres in 20 different Bavarian districts (each well inside its district), so
    /// fixes land in many districts and a small jitter never crosses a border.
    static let places: [(lat: Double, lon: Double)] = [
        (48.137, 11.575), (48.366, 10.898), (49.452, 11.077), (49.013, 12.101), (49.791, 9.953),
        (48.766, 11.426), (49.477, 10.989), (49.590, 11.004), (49.892, 10.887), (49.945, 11.578),
        (48.537, 12.152), (48.574, 13.461), (47.856, 12.128), (47.726, 10.314), (49.977, 9.148),
        (50.313, 11.912), (50.049, 10.222), (49.445, 11.858), (48.882, 12.573), (49.677, 12.156),
    ]

    /// The fix of device `index`: its place plus a jitter of up to ~150 m, `round` moving it a little.
    static func payload(index: Int, round: Int, tst: Int) -> [UInt8] {
        let place = places[index % places.count]
        let lat = place.lat + Double((index / places.count) % 97) * 0.00003 + Double(round % 5) * 0.00001
        let lon = place.lon + Double((index / places.count) % 89) * 0.00003
        return Array("{\"lat\":\(format6(lat)),\"lon\":\(format6(lon)),\"tst\":\(tst)}".utf8)
    }

    static func format6(_ value: Double) -> String {
        String(format: "%.6f", value)
    }

    static var now: Int { Int(Date().timeIntervalSince1970) }

    // MARK: - Clients

    /// Publisher and observer, connected; the observer counts every non-retained state into
    /// `window` and hands its key to `onState`.
    private func clients(
        tag: String, window: InFlightWindow, onState: @escaping @Sendable (Substring, ContinuousClock.Instant) -> Void
    ) async throws -> (publisher: MQTTClient, observer: MQTTClient, task: Task<Void, Never>) {
        var publisherConfiguration = MQTTConfiguration(host: host, port: port, clientID: "bench-load-\(tag)")
        publisherConfiguration.maxInflight = 1_000
        publisherConfiguration.protocolVersion = protocolVersion
        var observerConfiguration = MQTTConfiguration(host: host, port: observePort ?? port, clientID: "bench-observer-\(tag)")
        observerConfiguration.protocolVersion = protocolVersion
        observerConfiguration.receiveMaximum = 1_000
        observerConfiguration.incomingBufferSize = 500_000
        let publisher = MQTTClient(configuration: publisherConfiguration)
        let observer = MQTTClient(configuration: observerConfiguration)
        try await publisher.connect()
        try await observer.connect()
        try await observer.subscribe([(target.outputFilter, .atLeastOnce)])
        let target = self.target
        let clock = ContinuousClock()
        let task = Task {
            for await message in observer.messages {
                // Retained states are from earlier fixes (delivered on subscribing): not ours.
                if message.retain { continue }
                guard let key = target.key(ofOutput: message.topic) else { continue }
                onState(key, clock.now)
                window.release()
            }
        }
        return (publisher, observer, task)
    }

    /// Fails the window after `seconds`, so a lost state ends the run with an error, not a hang.
    private func watchdog(_ window: InFlightWindow, seconds: Int) -> Task<Void, Never> {
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            if !Task.isCancelled { window.fail() }
        }
    }

    /// Sends `count` fixes (`fix(i)` gives topic and payload) through the window, with
    /// concurrent lanes for QoS 1 so that PUBACK round trips do not serialize the sender.
    private func send(
        count: Int, window: InFlightWindow, publisher: MQTTClient, qos: MQTTQoS,
        fix: @escaping @Sendable (Int) -> (String, [UInt8])
    ) async throws {
        if qos == .atMostOnce {
            for i in 0..<count {
                await window.acquire()
                let (topic, payload) = fix(i)
                try await publisher.publish(topic: topic, payload: payload, qos: .atMostOnce)
            }
            return
        }
        let next = SharedCounter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<64 {
                group.addTask {
                    while true {
                        await window.acquire()
                        let i = next.value.add(1, ordering: .relaxed).oldValue
                        if i >= count {
                            window.release()  // not sent: give the slot back
                            return
                        }
                        let (topic, payload) = fix(i)
                        try await publisher.publish(topic: topic, payload: payload, qos: qos)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// One fix per device at QoS 1, and waits for all their states: afterwards every device is
    /// known to the daemon, so later fixes cause a state publish and nothing else.
    private func warmUp(
        devices: Int, prefix: String, tst: Int, window: InFlightWindow, publisher: MQTTClient
    ) async throws -> Bool {
        let target = self.target
        try await send(count: devices, window: window, publisher: publisher, qos: .atLeastOnce) { i in
            (inputTopic("\(prefix)\(i)"), Self.payload(index: i, round: 0, tst: tst))
        }
        return await window.drain()
    }

    // MARK: - Modes

    func throughput(devices: Int, count: Int, window size: Int) async throws -> String {
        let tag = "tp\(target.rawValue)q\(qos.rawValue)-\(Self.now % 100_000)"
        let prefix = "t\(Self.now % 100_000)x"
        let window = InFlightWindow(limit: size)
        let (publisher, observer, task) = try await clients(tag: tag, window: window) { _, _ in }
        let dog = watchdog(window, seconds: 300)
        defer { dog.cancel() }
        let base = Self.now
        guard try await warmUp(devices: devices, prefix: prefix, tst: base, window: window, publisher: publisher) else {
            throw BenchmarkFailure("warm-up: \(window.outstanding) of \(devices) states missing")
        }
        let clock = ContinuousClock()
        let start = clock.now
        let target = self.target
        try await send(count: count, window: window, publisher: publisher, qos: qos) { i in
            let device = i % devices
            let round = i / devices + 1
            return (inputTopic("\(prefix)\(device)"), Self.payload(index: device, round: round, tst: base + round))
        }
        guard await window.drain() else {
            throw BenchmarkFailure("\(window.outstanding) of \(count) states missing after the timeout")
        }
        let seconds = Self.seconds(clock.now - start)
        task.cancel()
        await publisher.disconnect()
        await observer.disconnect()
        return "mode=throughput target=\(target.rawValue) qos=\(qos.rawValue) devices=\(devices) count=\(count) "
            + "window=\(size) seconds=\(String(format: "%.3f", seconds)) rate=\(Int((Double(count) / seconds).rounded()))"
    }

    func latency(rate: Int, seconds: Int) async throws -> String {
        let count = rate * seconds
        let tag = "lat\(target.rawValue)q\(qos.rawValue)-\(Self.now % 100_000)"
        let prefix = "l\(Self.now % 100_000)x"
        let window = InFlightWindow(limit: 500)
        let sent = Mutex<[String: ContinuousClock.Instant]>([:])
        let latencies = Mutex<[Double]>([])
        latencies.withLock { $0.reserveCapacity(count) }
        let (publisher, observer, task) = try await clients(tag: tag, window: window) { key, at in
            if let sentAt = sent.withLock({ $0.removeValue(forKey: String(key)) }) {
                latencies.withLock { $0.append(Self.seconds(at - sentAt) * 1_000) }
            }
        }
        let dog = watchdog(window, seconds: 300)
        defer { dog.cancel() }
        let base = Self.now
        guard try await warmUp(devices: count, prefix: prefix, tst: base, window: window, publisher: publisher) else {
            throw BenchmarkFailure("warm-up: \(window.outstanding) of \(count) states missing")
        }
        // Paced: fix i leaves at start + i/rate, whatever the previous one is doing.
        let clock = ContinuousClock()
        let interval = Duration.seconds(1) / rate
        let start = clock.now + .milliseconds(10)
        let qos = self.qos
        let target = self.target
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<count {
                try await Task.sleep(until: start + interval * i, clock: clock)
                await window.acquire()
                let key = "\(prefix)\(i)"
                let topic = inputTopic(key)
                let payload = Self.payload(index: i, round: 1, tst: base + 1)
                sent.withLock { $0[key] = clock.now }
                if qos == .atMostOnce {
                    try await publisher.publish(topic: topic, payload: payload, qos: .atMostOnce)
                } else {
                    group.addTask { try await publisher.publish(topic: topic, payload: payload, qos: qos) }
                }
            }
            try await group.waitForAll()
        }
        let finished = clock.now
        guard await window.drain() else {
            throw BenchmarkFailure("\(window.outstanding) of \(count) states missing after the timeout")
        }
        task.cancel()
        await publisher.disconnect()
        await observer.disconnect()
        let sorted = latencies.withLock { $0 }.sorted()
        func percentile(_ p: Double) -> String {
            guard !sorted.isEmpty else { return "nan" }
            let index = min(sorted.count - 1, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1)
            return String(format: "%.3f", sorted[max(0, index)])
        }
        let achieved = Double(count) / Self.seconds(finished - start)
        return "mode=latency target=\(target.rawValue) qos=\(qos.rawValue) rate=\(rate) count=\(sorted.count) "
            + "achieved_rate=\(Int(achieved.rounded())) p50_ms=\(percentile(50)) p90_ms=\(percentile(90)) "
            + "p99_ms=\(percentile(99)) max_ms=\(percentile(100))"
    }

    /// VmRSS before, right when the last state came back, and `settle` seconds later (the daemon
    /// writes its state within 5 s of a change and gives free heap pages back after writing).
    func rss(pid: Int32, devices: Int, window size: Int, settle: Int) async throws -> String {
        guard let before = memoryOfProcess(pid) else { throw BenchmarkFailure("cannot read /proc/\(pid)/status") }
        let tag = "rss-\(Self.now % 100_000)"
        let window = InFlightWindow(limit: size)
        let (publisher, observer, task) = try await clients(tag: tag, window: window) { _, _ in }
        let dog = watchdog(window, seconds: 900)
        defer { dog.cancel() }
        let clock = ContinuousClock()
        let start = clock.now
        guard try await warmUp(devices: devices, prefix: "m", tst: Self.now, window: window, publisher: publisher) else {
            throw BenchmarkFailure("\(window.outstanding) of \(devices) states missing after the timeout")
        }
        let seconds = Self.seconds(clock.now - start)
        task.cancel()
        await publisher.disconnect()
        await observer.disconnect()
        guard let after = memoryOfProcess(pid) else { throw BenchmarkFailure("process \(pid) is gone") }
        try await Task.sleep(for: .seconds(settle))  // a measurement interval, nothing to await
        guard let settled = memoryOfProcess(pid) else { throw BenchmarkFailure("process \(pid) is gone") }
        return "mode=rss target=\(target.rawValue) devices=\(devices) rss_before_kb=\(before.rssKB) rss_kb=\(after.rssKB) "
            + "rss_settled_kb=\(settled.rssKB) settle_s=\(settle) hwm_kb=\(settled.peakKB) seconds=\(String(format: "%.1f", seconds))"
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// An atomic counter the sender lanes share.
final class SharedCounter: Sendable {
    let value = Atomic<Int>(0)
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
