import AmpelData
import AmpelDomain
import Foundation

/// `outputs.json` in the state directory: the ``PublishedShape`` of the device states and
/// texts topics retained on the broker.
///
/// Written only once the broker has taken a walk that republished every state in the new
/// shape: a crash before then leaves the old record, and the next start republishes again.
struct PublishedShapeFile: Sendable {
    private let record: StateDirectoryRecord<Content>
    var path: String { record.path }

    init(directory: String) {
        record = StateDirectoryRecord(directory: directory, name: "outputs.json", what: "a record of the published states")
    }

    struct Content: Codable {
        var version = 1
        var shape: PublishedShape
    }

    /// What the last run left retained: ``PublishedShape/unknown`` without a file (a first run,
    /// whose walk has no device to republish, or an earlier release's state directory) and, with
    /// the reason, for a file that cannot be read.
    func published() -> (shape: PublishedShape, problem: String?) {
        let loaded = record.load()
        return (loaded.content?.shape ?? .unknown, loaded.problem)
    }

    func save(_ shape: PublishedShape) throws {
        try record.save(Content(shape: shape))
    }
}
