import AmpelData
import Foundation
import Testing

/// The one writer of the daemon's state file and the data cache.
@Suite struct AtomicFileTests {
    func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-atomic-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func mode(_ path: String) throws -> Int? {
        try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
    }

    @Test func theContentIsReplacedByRenameLeavingNoTemporaryFile() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = AtomicFile(path: dir + "/f.json", mode: 0o644)
        try file.write(Array("old content".utf8))
        // A reader that opened the old file keeps the whole old content: the new file is renamed
        // over it, never written into it.
        let reader = try #require(FileHandle(forReadingAtPath: file.path))
        defer { try? reader.close() }
        try file.write { output in
            output.append(Array("new ".utf8))
            output.append(Array("content".utf8))
        }
        #expect(try reader.readToEnd() == Data("old content".utf8))
        #expect(FileManager.default.contents(atPath: file.path) == Data("new content".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["f.json"])
    }

    @Test func theModeIsTheOneAskedFor() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.json"
        try AtomicFile(path: path, mode: 0o644).write(Array("{}".utf8))
        #expect(try mode(path) == 0o644)
        // Replacing a readable file with a private one leaves no reader access behind.
        try AtomicFile(path: path, mode: 0o600).write(Array("{}".utf8))
        #expect(try mode(path) == 0o600)
    }

    @Test func aFailedReplaceKeepsTheOldFileAndLeavesNoTemporaryFile() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The target is a non-empty directory: the content is written, then the rename fails.
        // (A directory without write permission would not do: the tests may run as root.)
        let target = dir + "/busy"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        try Data("old".utf8).write(to: URL(fileURLWithPath: target + "/keep"))
        let error = #expect(throws: AtomicFileError.self) { try AtomicFile(path: target, mode: 0o600).write(Array("new".utf8)) }
        #expect(error?.step == "replace")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["busy"])
        #expect(FileManager.default.contents(atPath: target + "/keep") == Data("old".utf8))
    }

    @Test func aMissingDirectoryIsAnErrorThatNamesTheStep() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let error = #expect(throws: AtomicFileError.self) {
            try AtomicFile(path: dir + "/missing/f.json", mode: 0o600).write(Array("x".utf8))
        }
        #expect(error?.step == "create")
        #expect(error?.description.contains("No such file or directory") == true)
    }

    #if os(Linux)
    @Test func theTemporaryFileIsClosedOnExec() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var flags: [Int] = []
        try AtomicFile(path: dir + "/f.json", mode: 0o600).write { _ in
            // The descriptor open on the temporary file, as the kernel lists it.
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"),
                      target.hasPrefix(dir + "/."), target.hasSuffix(".tmp"),
                      let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8),
                      let line = info.split(separator: "\n").first(where: { $0.hasPrefix("flags:") }),
                      let value = Int(line.dropFirst("flags:".count).trimmingCharacters(in: .whitespaces), radix: 8)
                else { continue }
                flags.append(value)
            }
        }
        #expect(flags.count == 1)
        #expect(flags.allSatisfy { $0 & 0o2000000 != 0 }, "O_CLOEXEC")
    }
    #endif
}
