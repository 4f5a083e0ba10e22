import AmpelData
import AmpelDomain
import Foundation

/// `outputs.json` in the state directory: the ``PublishedShape`` of the device states and
/// texts topics retained on the broker.
///
/// Written only once the broker has taken a walk that republished every state in the new
/// shape: a crash before then leaves the old record, and the next start republishes again.
public struct PublishedShapeFile: Sendable {
    public let path: String

    public init(directory: String) {
        path = directory + "/outputs.json"
    }

    struct Content: Codable {
        var version = 1
        var shape: PublishedShape
    }

    /// What the last run left retained: ``PublishedShape/unknown`` without a file (a first run,
    /// whose walk has no device to republish, or an earlier release's state directory) and, with
    /// the reason, for a file that cannot be read.
    public func published() -> (shape: PublishedShape, problem: String?) {
        guard let data = FileManager.default.contents(atPath: path) else {
            return (.unknown, FileManager.default.fileExists(atPath: path) ? "cannot read \(path)" : nil)
        }
        do {
            return (try JSONDecoder().decode(Content.self, from: data).shape, nil)
        } catch {
            return (.unknown, "\(path) is not a record of the published states: \(error)")
        }
    }

    public func save(_ shape: PublishedShape) throws {
        try AtomicFile(path: path, mode: 0o644).write(Array(try AmpelJSON.data(Content(shape: shape))))
    }
}
