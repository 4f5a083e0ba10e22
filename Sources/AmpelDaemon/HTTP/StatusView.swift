import AmpelCore
import Foundation
import AmpelDomain
import Synchronization

/// What `ampel run` shows over HTTP (the API, the page, `/metrics`): the objects its MQTT
/// topics carry, as the daemon's loop last handed them over.
///
/// The loop owns the engine and never waits for a reader: at each flush tick it hands over a
/// ``Snapshot`` of value types (copy-on-write, so the hand-over copies nothing) built by the
/// same writers as the topics: the districts' ``Signal``s the engine published, the device
/// records it persisted, the `bridge/info` payload. Readers take the whole snapshot under a
/// short lock and work on their copy, so a reader sees one consistent moment and a slow
/// client holds up nobody.
///
/// The device table is the one large part: handing it over makes the engine's next change copy
/// it, so it is handed over only while someone reads devices (``devices()``).
final class StatusView: Sendable {
    /// One district as published on `<base>/district/<ags>/state` (``Signal/json(device:)``).
    struct District: Sendable, Hashable {
        var ags: String
        /// The signal in the default language, as on the district's `state` topic.
        var signal: Signal
    }

    /// One configured lamp and what it was last told.
    struct Lamp: Sendable, Hashable {
        var settings: LampSettings
        /// What the lamp last said about its availability; `nil` before it said anything.
        var online: Bool?
        /// The colour last sent (`#RRGGBB`) and whether it blinks; `nil` before the first command.
        var color: String?
        var blink: Bool
    }

    /// Why the daemon is not ready to serve, or `nil` when it is (`/readyz`).
    struct Readiness: Sendable, Hashable {
        var dataLoaded = false
        var connected = false
        var subscribed = false
        /// Why the last connection attempt failed, while not connected.
        var brokerError: String?
        /// Why it cannot take locations although connected (``PublishRefusals/problem()``).
        var inputsRefused: String?
        /// What works only in part (a journal that cannot be written, then
        /// ``PublishRefusals/degraded(now:)``): `/readyz` answers `degraded` with it while the
        /// daemon is otherwise ready.
        var degraded: String?
        /// Why the journal cannot be written (also ``degraded``); `nil` while it is safe.
        var journal: String?

        var problem: String? {
            if !dataLoaded { return "data not loaded" }
            if !connected { return brokerError.map { "broker not connected: \($0)" } ?? "broker not connected" }
            if let inputsRefused { return inputsRefused }
            if !subscribed { return "not subscribed" }
            return nil
        }
    }

    /// One thing the daemon rejected (`/api/bridge`'s `errors`, newest last).
    struct ErrorEntry: Sendable, Hashable {
        /// Seconds since 1970.
        var at: Int
        /// `dropped` (a location message, by ``reason``) or `rejected` (an RKI answer).
        var kind: String
        var reason: String
        /// The message's topic, or the data source.
        var topic: String
        var detail: String
    }

    /// The last ``capacity`` errors, oldest first; filled by the loop where it counts them.
    struct RecentErrors: Sendable, Hashable {
        static let capacity = 50
        private var ring: [ErrorEntry] = []
        private var next = 0

        init() {}

        mutating func append(_ entry: ErrorEntry) {
            if ring.count < Self.capacity {
                ring.append(entry)
            } else {
                ring[next] = entry
                next = (next + 1) % Self.capacity
            }
        }

        /// Oldest first.
        var entries: [ErrorEntry] { Array(ring[next...] + ring[..<next]) }
    }

    struct Snapshot: Sendable {
        /// Counts the hand-overs; `0` before the loop's first.
        var generation = 0
        var ruleSet: RuleSet?
        var dataset: Dataset?
        var stale = false
        /// The region's districts in code order.
        var districts: [District] = []
        /// The device table as of ``devicesGeneration`` (see ``StatusView/devices()``).
        var devices = DeviceTable()
        /// The number of devices now (always current, unlike ``devices``).
        var deviceCount = 0
        /// Which hand-over the table came with; equal to ``generation`` when it is current.
        var devicesGeneration = 0
        var devicesCurrent: Bool { generation > 0 && devicesGeneration == generation }
        var lamps: [Lamp] = []
        /// The `bridge/info` payload as last built (``BridgeInfo/json()``).
        var bridgeInfo: [UInt8] = []
        var counters = Counters()
        var messagesReceived = 0
        /// Publishes handed to the broker, by ``SignalEngine/PublishKind`` name.
        var publishedByKind: [String: Int] = [:]
        var errors = RecentErrors()
        var readiness = Readiness()
        /// The data in force with its source's account (`/readyz`).
        var feed: FeedState?
        /// Seconds since 1970 of the hand-over.
        var at = 0

        init() {}

        /// The district with code `ags`, if the region has it.
        func district(_ ags: String) -> District? {
            var low = 0
            var high = districts.count
            while low < high {
                let mid = (low + high) / 2
                if districts[mid].ags < ags { low = mid + 1 } else { high = mid }
            }
            return low < districts.count && districts[low].ags == ags ? districts[low] : nil
        }
    }

    private let current = Mutex(Snapshot())
    /// A reader asked for devices since the last hand-over.
    private let devicesWanted = Atomic<Bool>(false)
    /// Readers waiting for the next hand-over.
    private let waiting = Mutex<[CheckedContinuation<Void, Never>]>([])
    /// The device keys sorted, for paging, with the generation of the table they were taken from.
    private let sorted = Mutex<(generation: Int, keys: [String])>((-1, []))
    /// Set by the transport's connection events, read by `/readyz` and `/metrics`.
    let connected = Atomic<Bool>(false)
    /// Why the last attempt to connect failed; cleared by a connection.
    let brokerError = Mutex<String?>(nil)
    /// What the broker refused, live (the transport's network thread records it).
    let refusals = PublishRefusals()
    /// Why the journal cannot be written, set by the journal the moment it fails (on whichever
    /// thread appended) and cleared once it is safe again: `/readyz` says so at once.
    let journalProblem = Mutex<String?>(nil)
    let clock: @Sendable () -> Double

    init(clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.clock = clock
    }

    /// The last hand-over; devices possibly older (``Snapshot/devicesCurrent``).
    func snapshot() -> Snapshot {
        var snapshot = current.withLock { $0 }
        snapshot.readiness.connected = connected.load(ordering: .relaxed)
        snapshot.readiness.brokerError = snapshot.readiness.connected ? nil : brokerError.withLock { $0 }
        snapshot.readiness.inputsRefused = refusals.problem()
        snapshot.readiness.journal = journalProblem.withLock { $0 }
        snapshot.readiness.degraded = snapshot.readiness.journal ?? refusals.degraded(now: clock())
        return snapshot
    }

    /// The device table of the last hand-over (the loop reuses it while the table is unchanged).
    func handedDevices() -> DeviceTable { current.withLock { $0.devices } }

    /// The last hand-over with a current device table: when the one held is older, asks the loop
    /// for the table and waits for its next tick (at most `limit`).
    func devices(waitingAtMost limit: Duration = .seconds(2)) async -> Snapshot {
        let held = snapshot()
        if held.devicesCurrent { return held }
        devicesWanted.store(true, ordering: .relaxed)
        // A waiter left behind by the limit is resumed by the next hand-over.
        _ = await FirstOutcome.finished(before: .now + limit) {
            await withCheckedContinuation { continuation in self.waiting.withLock { $0.append(continuation) } }
            return true
        }
        return snapshot()
    }

    /// The keys of `snapshot`'s table in byte order, sorted once per table.
    func sortedKeys(of snapshot: Snapshot) -> [String] {
        if let cached = sorted.withLock({ $0.generation == snapshot.devicesGeneration ? $0.keys : nil }) { return cached }
        let keys = snapshot.devices.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        sorted.withLock { $0 = (snapshot.devicesGeneration, keys) }
        return keys
    }

    /// Whether the loop should hand the device table over with the next snapshot.
    func takeDevicesWanted() -> Bool { devicesWanted.exchange(false, ordering: .relaxed) }

    /// The loop's hand-over.
    func publish(_ snapshot: Snapshot) {
        current.withLock { $0 = snapshot }
        let resumed = waiting.withLock { waiters in
            defer { waiters.removeAll() }
            return waiters
        }
        for continuation in resumed { continuation.resume() }
    }
}
