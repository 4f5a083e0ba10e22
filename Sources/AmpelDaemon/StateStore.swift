import AmpelDomain
import Foundation

/// The engine's memory on disk: `state.json` in the state directory, written atomically.
///
/// Written to a temporary file, flushed to disk, then renamed over the old one: a crash or a
/// power cut leaves either the old state or the new one, never half of each.
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

    /// Writes `state` atomically (temporary file, fsync, rename, fsync of the directory).
    public func save(_ state: PersistedState) throws(StateStoreError) {
        let data: Data
        do {
            data = try AmpelJSON.data(state)
        } catch {
            throw StateStoreError("cannot encode the state: \(error)")
        }
        try Self.writeAtomically(data, to: path, directory: directory)
    }

    /// Creates the directory (and its parents) if missing.
    public func prepare() throws(StateStoreError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StateStoreError("cannot create the state directory \(directory): \(error.localizedDescription)")
        }
    }

    static func writeAtomically(_ data: Data, to path: String, directory: String) throws(StateStoreError) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw StateStoreError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        var failure: String?
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = String(cString: strerror(errno))
                    return
                }
                offset += written
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = String(cString: strerror(errno)) }
        close(fd)
        if let failure {
            unlink(temporary)
            throw StateStoreError("cannot write \(temporary): \(failure)")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw StateStoreError("cannot replace \(path): \(reason)")
        }
        let dirfd = open(directory, O_RDONLY)
        if dirfd >= 0 {
            fsync(dirfd)
            close(dirfd)
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
