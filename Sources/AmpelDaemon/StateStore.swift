import AmpelData
import AmpelDomain
import Foundation
import Logging
import Synchronization

/// The engine's memory on disk: `state.json` in the state directory, written with
/// ``AtomicFile``: a crash or a power cut leaves either the old state or the new one.
public struct StateStore: Sendable {
    public let directory: String
    public var path: String { directory + "/state.json" }

    public init(directory: String) {
        self.directory = directory
    }

    /// The saved state; an empty one when there is no file yet.
    ///
    /// - Throws: ``StateStoreError`` when the file exists but cannot be read or understood:
    ///   the daemon must not start from nothing and re-alert every device.
    public func load() throws(StateStoreError) -> PersistedState {
        guard FileManager.default.fileExists(atPath: path) else { return PersistedState() }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StateStoreError("cannot read \(path)")
        }
        do {
            let state = try JSONDecoder().decode(PersistedState.self, from: data)
            guard state.version == PersistedState.currentVersion else {
                throw StateStoreError("\(path) has version \(state.version), this ampel reads \(PersistedState.currentVersion)")
            }
            return state
        } catch let error as StateStoreError {
            throw error
        } catch {
            throw StateStoreError("\(path) is not a valid state file: \(error)")
        }
    }

    /// Writes `state` with ``AtomicFile``, mode `0o600`: the file holds every device's position.
    ///
    /// The JSON is written record by record in 64 KiB chunks rather than built in memory:
    /// with 100,000 devices an encoder's intermediate tree would cost far more than the
    /// devices themselves. ``load()`` reads it back with `JSONDecoder`.
    public func save(_ state: PersistedState) throws(StateStoreError) {
        do {
            try AtomicFile(path: path, mode: 0o600).write { output in
                var json = JSONWriter(capacity: 1 << 17)
                func flushIfFull() {
                    guard json.bytes.count >= 1 << 16 else { return }
                    output.append(json.bytes)
                    json.removeAll()
                }
                json.raw(#"{"version":"#)
                json.number(state.version)
                json.raw(#","districts":{"#)
                var first = true
                for (ags, phase) in state.districts {
                    if !first { json.raw(",") }
                    first = false
                    json.string(ags)
                    json.raw(":")
                    json.string(phase)
                }
                json.raw(#"},"devices":{"#)
                first = true
                state.devices.forEach { key, record in
                    if !first { json.raw(",\n") }
                    first = false
                    json.string(key)
                    json.raw(#":{"lat":"#)
                    json.number(record.lat)
                    json.raw(#","lon":"#)
                    json.number(record.lon)
                    json.raw(#","tst":"#)
                    json.number(record.tst)
                    json.raw(#","lang":"#)
                    json.string(record.lang)
                    json.raw(#","district":"#)
                    json.optional(record.district) { $1.write(to: &$0) }
                    json.raw(#","phase":"#)
                    json.string(record.phase)
                    json.raw(#","dataDate":"#)
                    json.string(record.dataDate)
                    json.raw(#","stale":"#)
                    json.bool(record.stale)
                    json.raw("}")
                    flushIfFull()
                }
                json.raw("}}\n")
                output.append(json.bytes)
            }
        } catch {
            throw StateStoreError("\(error)")
        }
    }

    /// Creates the directory (and its parents) if missing.
    public func prepare() throws(StateStoreError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StateStoreError("cannot create the state directory \(directory): \(error.localizedDescription)")
        }
    }
}

public struct StateStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Lets a log line through at most `burst` times per `interval`, and says how many it held back.
///
/// Bad payloads can arrive thousands per second; the log must not grow with them.
public struct RateLimiter: Sendable {
    public let interval: Double
    public let burst: Int
    private var windowStart: Double = -.infinity
    private var inWindow = 0
    private var suppressed = 0

    public init(interval: Double = 10, burst: Int = 5) {
        self.interval = interval
        self.burst = burst
    }

    /// Whether to log now (`now` in seconds, any monotonic origin); with the number held back since the last line.
    public mutating func admit(now: Double) -> (log: Bool, suppressed: Int) {
        if now - windowStart >= interval {
            windowStart = now
            inWindow = 0
        }
        guard inWindow < burst else {
            suppressed += 1
            return (false, 0)
        }
        inWindow += 1
        let held = suppressed
        suppressed = 0
        return (true, held)
    }
}

/// Writes the daemon's state on a thread of its own, newest state first.
///
/// The daemon's loop hands over a copy (copy-on-write: cheap until the engine changes it) and
/// goes on; the writer thread writes it with ``StateStore/save(_:)``. States handed over while a
/// write runs replace each other, so a slow disk costs one write per interval, not a queue.
///
/// The writer runs at the lowest CPU priority Linux has (`SCHED_IDLE`): with many devices a
/// write is tens of megabytes of JSON, and on a small machine it must not take the CPU from the
/// loop and the network thread while fixes are arriving (at normal priority it shows up in the
/// latency tail). It still gets the CPU whenever the daemon is idle, and ``finish(_:)`` waits
/// for it at shutdown, when nothing else runs.
public final class StateSaver: Sendable {
    private struct Shared {
        var pending: PersistedState?
        var waiters: [CheckedContinuation<Void, Never>] = []
        var trim = false
        var stop = false
    }

    private let worker: Worker

    public init(store: StateStore, logger: Logger) {
        let worker = Worker(store: store, logger: logger)
        self.worker = worker
        let thread = Thread { worker.run() }
        thread.name = "ampel-state"
        thread.start()
    }

    deinit {
        worker.shared.withLock { $0.stop = true }
        worker.wake.signal()
    }

    /// Schedules a write of `state` (or of a newer one handed over before the write starts).
    public func save(_ state: PersistedState) {
        let first = worker.shared.withLock { shared in
            defer { shared.pending = state }
            return shared.pending == nil
        }
        if first { worker.wake.signal() }
    }

    /// Gives free heap pages back to the system, on the writer thread after any write.
    ///
    /// `malloc_trim` holds the allocator's locks while it walks the heap; the daemon asks for it
    /// when its table has grown and the intake has gone quiet, so no fix waits behind it.
    public func trimHeap() {
        worker.shared.withLock { $0.trim = true }
        worker.wake.signal()
    }

    /// Writes `state` (after any write in progress) and returns when it is on disk.
    public func finish(_ state: PersistedState) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            worker.shared.withLock { shared in
                shared.pending = state
                shared.waiters.append(continuation)
            }
            worker.wake.signal()
        }
    }

    /// The writer thread's side; holds no reference to the saver, so releasing the saver stops it.
    private final class Worker: Sendable {
        let store: StateStore
        let logger: Logger
        let shared = Mutex(Shared())
        let wake = DispatchSemaphore(value: 0)

        init(store: StateStore, logger: Logger) {
            self.store = store
            self.logger = logger
        }

        func run() {
            ProcessMemory.lowerCurrentThreadToIdle()
            while true {
                wake.wait()
                let (state, waiters, trim, stop) = shared.withLock { shared in
                    defer { shared.pending = nil; shared.waiters = []; shared.trim = false }
                    return (shared.pending, shared.waiters, shared.trim, shared.stop)
                }
                if let state { write(state) }
                if trim {
                    let start = ContinuousClock.now
                    ProcessMemory.trim()
                    logger.debug("heap trimmed", metadata: ["took": "\(ContinuousClock.now - start)"])
                }
                for waiter in waiters { waiter.resume() }
                if stop { return }
            }
        }

        private func write(_ state: PersistedState) {
            let start = ContinuousClock.now
            do {
                try store.save(state)
            } catch {
                logger.error("cannot save state", metadata: ["error": "\(error)"])
            }
            logger.debug("state saved", metadata: ["devices": "\(state.devices.count)", "took": "\(ContinuousClock.now - start)"])
        }
    }
}
