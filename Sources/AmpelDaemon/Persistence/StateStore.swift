import AmpelData
import AmpelDomain
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// The engine's memory on disk: `state.json` in the state directory, written with
/// ``AtomicFile``: a crash or a power cut leaves either the old state or the new one.
struct StateStore: Sendable {
    let directory: String
    var path: String { directory + "/state.json" }

    init(directory: String) {
        self.directory = directory
    }

    /// The saved state; an empty one when there is no file yet.
    ///
    /// - Throws: ``StateStoreError`` when the file exists but cannot be read or understood:
    ///   the daemon must not start from nothing and re-alert every device.
    func load() throws(StateStoreError) -> PersistedState {
        guard FileManager.default.fileExists(atPath: path) else { return PersistedState() }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StateStoreError("cannot read \(path)")
        }
        do {
            let state = try StateFileReader.read(data)
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

    /// The saved state, or an empty one when the file cannot be read or understood: the file
    /// is then moved aside to `state.json.corrupt-<UTC time>` in the same directory (its
    /// content untouched, for whoever looks into it) and ``StateRecovery`` says where and why.
    ///
    /// A daemon that refuses to start over a bad state file stays down until someone moves it
    /// (systemd does not restart on a configuration error). The daemon then rebuilds the device
    /// phases from the states the broker retains before it alerts anyone (``RetainedState``);
    /// what the broker no longer holds costs that device one alert when it next reports, which
    /// is less harm than no signals at all.
    ///
    /// - Throws: ``StateStoreError`` only when the bad file cannot be moved aside (the state
    ///   directory is not writable): the daemon could not save its state either.
    func loadRecovering(now: Date = Date()) throws(StateStoreError) -> (state: PersistedState, recovery: StateRecovery?) {
        let reason: String
        do {
            return (try load(), nil)
        } catch {
            reason = error.message
        }
        let stamp = DatasetCache.timestamp(now)
        var target = path + ".corrupt-" + stamp
        var attempt = 1
        // Two restarts within one second must not overwrite the first file moved aside.
        while FileManager.default.fileExists(atPath: target) || (try? FileManager.default.destinationOfSymbolicLink(atPath: target)) != nil {
            attempt += 1
            target = path + ".corrupt-" + stamp + "-\(attempt)"
        }
        guard rename(path, target) == 0 else {
            let code = errno
            throw StateStoreError("\(reason); moving it aside to \(target) failed: \(String(cString: strerror(code)))")
        }
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            close(directoryFD)
        }
        return (PersistedState(), StateRecovery(movedTo: target, reason: reason, at: InternetTime.format(secondsSince1970: now.timeIntervalSince1970)))
    }

    /// Removes the temporary files that ``AtomicFile`` leaves behind when the process dies
    /// mid-write (`.state.json.<pid>.<n>.tmp`, `.incidence.json.<pid>.<n>.tmp`), in the state
    /// directory only; those of a process still running (an `ampel fetch`) are left alone.
    ///
    /// - Returns: the paths removed.
    @discardableResult
    func removeLeftovers() -> [String] {
        AtomicFile.removeLeftovers(in: directory, of: ["state.json", DatasetCache.fileName])
    }

    /// Writes `state` with ``AtomicFile``, mode `0o600`: the file holds every device's position.
    ///
    /// The JSON is written record by record in 64 KiB chunks rather than built in memory:
    /// with 100,000 devices an encoder's intermediate tree would cost far more than the
    /// devices themselves. ``load()`` reads it back with ``StateFileReader``.
    func save(_ state: PersistedState) throws(StateStoreError) {
        let written = try write(state)
        do {
            try written.replace()
        } catch {
            throw StateStoreError("\(error)")
        }
    }

    /// ``save(_:)`` up to the rename: the state on disk in a temporary file, not yet in place.
    func write(_ state: PersistedState) throws(StateStoreError) -> AtomicFile.Prepared {
        do {
            // The mark is small (a few numbers and the alerts awaiting an acknowledgement): its
            // Codable form, as ``load()`` reads it.
            let mark = try state.journal.map { [UInt8](try JSONEncoder().encode($0)) }
            return try AtomicFile(path: path, mode: 0o600).prepare { output in
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
                json.raw("}")
                if let mark {
                    json.raw(#","journal":"#)
                    output.append(json.bytes)
                    json.removeAll()
                    output.append(mark)
                }
                json.raw(#","devices":{"#)
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
                    // Only when true: most devices are not OwnTracks phones, and a file without it reads as `false`.
                    if record.owntracks { json.raw(#","owntracks":true"#) }
                    // Only when false: a device waiting for its first alert is rare, and a file
                    // without it (any file of an earlier version) reads as announced.
                    if !record.announced { json.raw(#","announced":false"#) }
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
    func prepare() throws(StateStoreError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StateStoreError("cannot create the state directory \(directory): \(error.localizedDescription)")
        }
    }
}

/// A state that was lost: a state file that could not be read at start and was moved aside
/// (``StateStore/loadRecovering(now:)``), or one that is missing while the journal continues
/// from it. The daemon rebuilds what it can from the broker (``rebuilt``).
struct StateRecovery: Sendable, Hashable {
    /// Where the file is now: `<state dir>/state.json.corrupt-<UTC time>`; `nil` when there
    /// was no file to move (it is missing, and the journal shows that it existed).
    let movedTo: String?
    /// Why it could not be read (the parse or read error), or why it counts as lost.
    let reason: String
    /// When, ISO 8601 UTC.
    let at: String
    /// What the start read back from the broker's retained states; `nil` until it has.
    var rebuilt: StateRebuild?

    init(movedTo: String?, reason: String, at: String, rebuilt: StateRebuild? = nil) {
        self.movedTo = movedTo
        self.reason = reason
        self.at = at
        self.rebuilt = rebuilt
    }
}

/// What a start after a lost state took from the broker's retained topics (``RetainedState``).
struct StateRebuild: Sendable, Hashable {
    /// Devices taken from their retained states (the journal did not know them).
    var devices: Int
    /// District phases taken from their retained `phase` topics.
    var districts: Int
    /// Device states read whose device the journal knew: its later decision was kept.
    var known: Int
    /// Retained messages on those topics that are no state the daemon writes (skipped).
    var skipped: Int
    /// How many devices the last run held (its retained `bridge/info`); `nil` without one.
    var expectedDevices: Int?
    /// Every retained message arrived: the broker answered the probe in time, and it sent at
    /// least as many device states as the last run held. A broker whose queue limits are too
    /// small for the flood drops the rest without a word (docs/deploy.md).
    var complete: Bool

    init(devices: Int, districts: Int, known: Int, skipped: Int, expectedDevices: Int?, complete: Bool) {
        self.devices = devices
        self.districts = districts
        self.known = known
        self.skipped = skipped
        self.expectedDevices = expectedDevices
        self.complete = complete
    }
}

package struct StateStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    let message: String
    /// The state directory has no room for what the daemon must write: exit 73 (EX_CANTCREAT).
    package var noRoom = false
    init(_ message: String) { self.message = message }
    package var description: String { message }

    /// The journal's first segment could not be made in `directory`: how much it needs and how
    /// much is free, so that the operator knows what to free.
    static func noRoom(_ directory: String, needed: Int, error: String) -> StateStoreError {
        var stats = statvfs()
        let free = statvfs(directory, &stats) == 0 ? Int(stats.f_bavail) * Int(stats.f_frsize) : nil
        let room = free.map { "\(Self.mebibytes($0)) free" } ?? "free space unknown"
        var failure = StateStoreError(
            "the state directory \(directory) has no room for the journal: it needs \(Self.mebibytes(needed)) for its first segment (and room for state.json), \(room) (\(error)); free space there or set state_dir (--state-dir, AMPEL_STATE_DIR) to a directory with room")
        failure.noRoom = true
        return failure
    }

    static func mebibytes(_ bytes: Int) -> String {
        String(format: "%.1f MiB", Double(bytes) / 1_048_576)
    }
}
