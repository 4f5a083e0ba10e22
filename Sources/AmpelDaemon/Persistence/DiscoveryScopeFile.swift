import AmpelData
import AmpelDomain
import Foundation

/// `homeassistant.json` in the state directory: the discovery scopes (prefix, node, devices
/// or not) whose configs may be retained on the broker, so that a start with discovery off,
/// `homeassistant.devices: false`, another prefix or another base topic removes what the
/// earlier runs announced (``SignalEngine/retireDiscovery()``).
///
/// A file of its own rather than a field of `state.json`: it changes only when the
/// configuration does, and must be on disk before the first config of a new scope goes out,
/// not at the next snapshot.
struct DiscoveryScopeFile: Sendable {
    private let record: StateDirectoryRecord<Content>
    var path: String { record.path }

    init(directory: String) {
        record = StateDirectoryRecord(directory: directory, name: "homeassistant.json", what: "a discovery scope file")
    }

    struct Content: Codable {
        var version = 1
        var announced: [DiscoveryScope]
    }

    /// What the file holds, `nil` when there is none. A file that cannot be read counts as
    /// missing (the caller decides what to assume), with the reason.
    func load() -> (scopes: [DiscoveryScope]?, problem: String?) {
        let loaded = record.load()
        return (loaded.content?.announced, loaded.problem)
    }

    /// What earlier runs may have announced. Without a file: nothing on a first run (an empty
    /// state), else what the releases before the file announced, the configured prefix and
    /// base topic with the devices.
    func announced(prefix: String, topics: Topics, firstRun: Bool) -> (scopes: [DiscoveryScope], problem: String?) {
        let loaded = load()
        if let scopes = loaded.scopes { return (scopes, nil) }
        if firstRun { return ([], loaded.problem) }
        return ([DiscoveryScope(prefix: prefix, node: DiscoveryTopics.node(of: topics), devices: true)], loaded.problem)
    }

    func save(_ scopes: [DiscoveryScope]) throws {
        try record.save(Content(announced: scopes))
    }
}
