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
public final class StatusView: Sendable {
    /// One district as published on `<base>/district/<ags>/state` (``Signal/json(device:)``).
    public struct District: Sendable, Hashable {
        public var ags: String
        /// The signal in the default language, as on the district's `state` topic.
        public var signal: Signal
    }

    /// One configured lamp and what it was last told.
    public struct Lamp: Sendable, Hashable {
        public var settings: LampSettings
        /// What the lamp last said about its availability; `nil` before it said anything.
        public var online: Bool?
        /// The colour last sent (`#RRGGBB`) and whether it blinks; `nil` before the first command.
        public var color: String?
        public var blink: Bool
    }

    /// Why the daemon is not ready to serve, or `nil` when it is (`/readyz`).
    public struct Readiness: Sendable, Hashable {
        public var dataLoaded = false
        public var connected = false
        public var subscribed = false
        /// Why the last connection attempt failed, while not connected.
        public var brokerError: String?
        /// Why it cannot take locations although connected (``PublishRefusals/problem()``).
        public var inputsRefused: String?
        /// What works only in part (a journal that cannot be written, then
        /// ``PublishRefusals/degraded(now:)``): `/readyz` answers `degraded` with it while the
        /// daemon is otherwise ready.
        public var degraded: String?
        /// Why the journal cannot be written (also ``degraded``); `nil` while it is safe.
        public var journal: String?

        public var problem: String? {
            if !dataLoaded { return "data not loaded" }
            if !connected { return brokerError.map { "broker not connected: \($0)" } ?? "broker not connected" }
            if let inputsRefused { return inputsRefused }
            if !subscribed { return "not subscribed" }
            return nil
        }
    }

    /// One thing the daemon rejected (`/api/bridge`'s `errors`, newest last).
    public struct ErrorEntry: Sendable, Hashable {
        /// Seconds since 1970.
        public var at: Int
        /// `dropped` (a location message, by ``reason``) or `rejected` (an RKI answer).
        public var kind: String
        public var reason: String
        /// The message's topic, or the data source.
        public var topic: String
        public var detail: String
    }

    /// The last ``capacity`` errors, oldest first; filled by the loop where it counts them.
    public struct RecentErrors: Sendable, Hashable {
        public static let capacity = 50
        private var ring: [ErrorEntry] = []
        private var next = 0

        public init() {}

        mutating func append(_ entry: ErrorEntry) {
            if ring.count < Self.capacity {
                ring.append(entry)
            } else {
                ring[next] = entry
                next = (next + 1) % Self.capacity
            }
        }

        /// Oldest first.
        public var entries: [ErrorEntry] { Array(ring[next...] + ring[..<next]) }
    }

    public struct Snapshot: Sendable {
        /// Counts the hand-overs; `0` before the loop's first.
        public var generation = 0
        public var ruleSet: RuleSet?
        public var dataset: Dataset?
        public var stale = false
        /// The region's districts in code order.
        public var districts: [District] = []
        /// The device table as of ``devicesGeneration`` (see ``StatusView/devices()``).
        public var devices = DeviceTable()
        /// The number of devices now (always current, unlike ``devices``).
        public var deviceCount = 0
        /// Which hand-over the table came with; equal to ``generation`` when it is current.
        public var devicesGeneration = 0
        public var devicesCurrent: Bool { generation > 0 && devicesGeneration == generation }
        public var lamps: [Lamp] = []
        /// The `bridge/info` payload as last built (``BridgeInfo/json()``).
        public var bridgeInfo: [UInt8] = []
        public var counters = Counters()
        public var messagesReceived = 0
        /// Publishes handed to the broker, by ``SignalEngine/PublishKind`` name.
        public var publishedByKind: [String: Int] = [:]
        public var errors = RecentErrors()
        public var readiness = Readiness()
        /// The data in force with its source's account (`/readyz`).
        public var feed: FeedState?
        /// Seconds since 1970 of the hand-over.
        public var at = 0

        public init() {}

        /// The district with code `ags`, if the region has it.
        public func district(_ ags: String) -> District? {
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
    public let refusals = PublishRefusals()
    /// Why the journal cannot be written, set by the journal the moment it fails (on whichever
    /// thread appended) and cleared once it is safe again: `/readyz` says so at once.
    let journalProblem = Mutex<String?>(nil)
    let clock: @Sendable () -> Double

    public init(clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.clock = clock
    }

    /// The last hand-over; devices possibly older (``Snapshot/devicesCurrent``).
    public func snapshot() -> Snapshot {
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
    public func devices(waitingAtMost limit: Duration = .seconds(2)) async -> Snapshot {
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
    public func sortedKeys(of snapshot: Snapshot) -> [String] {
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
