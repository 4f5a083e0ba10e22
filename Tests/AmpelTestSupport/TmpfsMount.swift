import Foundation

/// A small tmpfs mounted at a directory for a test: a state disk that can be filled.
/// Needs root and a kernel that lets this process mount (``available``, with the reason when not).
public final class TmpfsMount: Sendable {
    public let path: String

    /// Why a tmpfs cannot be mounted here, or nil when it can (tried once, on a scratch directory).
    public static let unavailable: String? = {
        guard geteuid() == 0 else { return "mounting a tmpfs needs root (the tests run as uid \(geteuid()))" }
        let probe = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-tmpfs-probe-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: probe) }
        do {
            try FileManager.default.createDirectory(atPath: probe, withIntermediateDirectories: true)
            let mount = try TmpfsMount(at: probe, megabytes: 1)
            mount.unmount()
            return nil
        } catch {
            return "this machine does not let the tests mount a tmpfs: \(error)"
        }
    }()

    /// Mounts a tmpfs of `megabytes` at `path` (an existing directory).
    public init(at path: String, megabytes: Int) throws {
        self.path = path
        let output = try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0700", "tmpfs", path])
        guard output.status == 0 else { throw MosquittoBroker.BrokerError(description: "mount failed: \(output.text)") }
    }

    /// Unmounts (lazily: a process that still has a file open there keeps it until it closes it).
    public func unmount() {
        _ = try? Self.run("/bin/umount", ["-l", path])
    }

    /// Fills the file system with `name` until nothing is left; returns the bytes taken.
    @discardableResult
    public func fill(_ name: String = "filler") -> Int {
        let fd = open(path + "/" + name, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var taken = 0
        var chunk = 1 << 20
        while chunk >= 4096 {
            let size = off_t(lseek(fd, 0, SEEK_END))
            if posix_fallocate(fd, size, off_t(chunk)) == 0 { taken += chunk } else { chunk /= 2 }
        }
        return taken
    }

    /// Removes what ``fill(_:)`` took.
    public func empty(_ name: String = "filler") {
        unlink(path + "/" + name)
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, text: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
