import AmpelData
import AmpelDomain
import Foundation

/// A small JSON record of its own in the state directory, beside the journal and the snapshot
/// (``DiscoveryScopeFile``, ``PublishedShapeFile``): it changes only when the configuration
/// does, so it is written whole and atomically when it does, and read once at start.
struct StateDirectoryRecord<Content: Codable>: Sendable {
    let path: String
    /// What the file holds, in the error for one that cannot be decoded.
    let what: String

    init(directory: String, name: String, what: String) {
        path = directory + "/" + name
        self.what = what
    }

    /// The content, `nil` without a file. A file that cannot be read or decoded counts as
    /// missing (the caller decides what to assume), with the reason.
    func load() -> (content: Content?, problem: String?) {
        guard let data = FileManager.default.contents(atPath: path) else {
            return (nil, FileManager.default.fileExists(atPath: path) ? "cannot read \(path)" : nil)
        }
        do {
            return (try JSONDecoder().decode(Content.self, from: data), nil)
        } catch {
            return (nil, "\(path) is not \(what): \(error)")
        }
    }

    func save(_ content: Content) throws {
        try AtomicFile(path: path, mode: 0o644).write(Array(try AmpelJSON.data(content)))
    }
}
