#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file whose content is replaced all at once: a crash or a power cut leaves the old content
/// or the new, never a mix or a truncated file.
///
/// The content goes to a temporary file in the same directory (opened close-on-exec, so a child
/// process started meanwhile does not inherit it), which is flushed to disk (`fsync`), closed
/// with its result checked (NFS reports write errors there), renamed over the file, and the
/// directory is flushed so that the rename itself survives a power cut. Any failure before the
/// rename removes the temporary file and leaves the old file as it was.
///
/// Used by the daemon's state file (`0o600`: it holds device positions) and the data cache
/// (`0o644`: public data).
public struct AtomicFile: Sendable {
    public let path: String
    /// The permission bits of the new file, set exactly (the umask does not narrow them).
    public let mode: UInt16

    public init(path: String, mode: UInt16) {
        self.path = path
        self.mode = mode
    }

    /// Where ``write(_:)`` hands the content to: appends to the temporary file, and remembers
    /// the first failure (later appends then do nothing).
    public final class Output {
        fileprivate let fd: Int32
        fileprivate var failure: Int32?

        fileprivate init(fd: Int32) {
            self.fd = fd
        }

        public func append(_ bytes: UnsafeRawBufferPointer) {
            guard failure == nil, var base = bytes.baseAddress else { return }
            var left = bytes.count
            while left > 0 {
                let written = systemWrite(fd, base, left)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                base += written
                left -= written
            }
        }

        public func append(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { append($0) }
        }
    }

    /// Removes the temporary files ``write(_:)`` left in `directory` for the files `names`
    /// when its process died between creating and renaming them: exactly the pattern
    /// `.<name>.<pid>.<number>.tmp`, and only when no process `<pid>` runs any more (a
    /// running writer's file is its own business). Nothing else is touched.
    ///
    /// - Returns: the paths removed.
    public static func removeLeftovers(in directory: String, of names: [String]) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var removed: [String] = []
        while let entry = readdir(dir) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let pid = leftoverPID(entryName, names: names) else { continue }
            if pid != getpid(), kill(pid, 0) == 0 || errno == EPERM { continue }
            let full = directory + "/" + entryName
            if unlink(full) == 0 { removed.append(full) }
        }
        return removed
    }

    /// The writer's pid when `entry` is named `.<one of names>.<pid>.<number>.tmp`.
    static func leftoverPID(_ entry: String, names: [String]) -> pid_t? {
        for name in names {
            let prefix = "." + name + "."
            guard entry.hasPrefix(prefix), entry.hasSuffix(".tmp") else { continue }
            let middle = entry.dropFirst(prefix.count).dropLast(4)
            let parts = middle.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0 >= "0" && $0 <= "9" } }),
                  let pid = pid_t(parts[0]), pid > 0, UInt32(parts[1]) != nil else { continue }
            return pid
        }
        return nil
    }

    /// Replaces the file's content with `bytes`.
    public func write(_ bytes: [UInt8]) throws(AtomicFileError) {
        try write { $0.append(bytes) }
    }

    /// Replaces the file's content with what `produce` appends to the output, for content
    /// written in pieces rather than built in memory first.
    public func write(_ produce: (Output) -> Void) throws(AtomicFileError) {
        try prepare(produce).replace()
    }

    /// The new content on disk in its temporary file, not yet in place: for writers that decide
    /// at the last moment whether it replaces the file (a newer content may have won meanwhile).
    public struct Prepared: Sendable {
        public let path: String
        let temporary: String
        let directory: String

        /// Renames the temporary file over the file and flushes the directory.
        public func replace() throws(AtomicFileError) {
            guard rename(temporary, path) == 0 else {
                let code = errno
                unlink(temporary)
                throw AtomicFileError(path: path, step: "replace", errno: code)
            }
            // The new content is in place; flushing the directory makes the rename durable. A file
            // system that cannot open or flush a directory still has the file replaced.
            let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if directoryFD >= 0 {
                _ = fsync(directoryFD)
                close(directoryFD)
            }
        }

        /// Removes the temporary file; the file keeps its content.
        public func discard() {
            unlink(temporary)
        }
    }

    /// Writes what `produce` appends into a new temporary file next to the file, flushed and
    /// closed; ``Prepared/replace()`` puts it in place.
    public func prepare(_ produce: (Output) -> Void) throws(AtomicFileError) -> Prepared {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = "\(directory)/.\(name).\(getpid()).\(UInt32.random(in: .min ... .max)).tmp"

        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(mode))
        guard fd >= 0 else { throw AtomicFileError(path: temporary, step: "create", errno: errno) }
        func fail(_ step: String, _ code: Int32, closing: Bool) -> AtomicFileError {
            if closing { close(fd) }
            unlink(temporary)
            return AtomicFileError(path: temporary, step: step, errno: code)
        }
        // `open` narrows the mode by the umask; the caller's mode is the one wanted.
        guard fchmod(fd, mode_t(mode)) == 0 else { throw fail("set the mode of", errno, closing: true) }
        let output = Output(fd: fd)
        produce(output)
        if let failure = output.failure { throw fail("write", failure, closing: true) }
        guard fsync(fd) == 0 else { throw fail("flush", errno, closing: true) }
        guard close(fd) == 0 else { throw fail("close", errno, closing: false) }
        return Prepared(path: path, temporary: temporary, directory: directory)
    }
}

/// `write(2)`, named apart from ``AtomicFile/write(_:)``.
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}

/// Why ``AtomicFile/write(_:)`` failed; the old file is unchanged.
public struct AtomicFileError: Error, Sendable, Hashable, CustomStringConvertible {
    public let path: String
    /// What failed: `create`, `write`, `flush`, `close`, `replace`, …
    public let step: String
    public let errno: Int32

    public init(path: String, step: String, errno: Int32) {
        self.path = path
        self.step = step
        self.errno = errno
    }

    public var description: String { "cannot \(step) '\(path)': \(String(cString: strerror(errno)))" }
}
