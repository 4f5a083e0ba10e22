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
