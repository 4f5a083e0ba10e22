import AmpelData
@testable import AmpelDaemon
import Foundation
import Testing

/// One default state directory for every command (docs/configuration.md, `state_dir`): the
/// daemon's configuration resolves it as `fetch`, `check` and `districts` do, and what is
/// named explicitly still wins.
@Suite("Default state directory")
struct StateDirectoryTests {
    static let environments: [[String: String]] = [
        ["AMPEL_STATE_DIR": "/srv/ampel", "STATE_DIRECTORY": "/var/lib/ampel", "XDG_STATE_HOME": "/home/x/.st", "HOME": "/home/x"],
        ["STATE_DIRECTORY": "/var/lib/ampel:/var/lib/other", "XDG_STATE_HOME": "/home/x/.st", "HOME": "/home/x"],
        ["XDG_STATE_HOME": "/home/x/.st", "HOME": "/home/x"],
        ["XDG_STATE_HOME": "relative/state", "HOME": "/home/x"],
        ["AMPEL_STATE_DIR": "", "STATE_DIRECTORY": "", "XDG_STATE_HOME": "", "HOME": "/home/x"],
    ]

    @Test("the order: AMPEL_STATE_DIR, systemd's STATE_DIRECTORY, XDG_STATE_HOME/ampel, ~/.local/state/ampel")
    func order() {
        #expect(Self.environments.map { StateDirectory.path(environment: $0) } == [
            "/srv/ampel", "/var/lib/ampel", "/home/x/.st/ampel", "/home/x/.local/state/ampel", "/home/x/.local/state/ampel",
        ])
        // The cache of `fetch`, `check` and `districts` is where the daemon keeps it.
        for environment in Self.environments {
            #expect(DatasetCache.defaultDirectory(environment: environment).path == StateDirectory.path(environment: environment))
        }
    }

    @Test("ampel run without a state_dir uses the directory every other command uses", arguments: environments)
    func daemonDefault(environment: [String: String]) throws {
        let config = try DaemonConfiguration.load(yaml: "lang: de\n", environment: environment)
        #expect(config.stateDirectory == StateDirectory.path(environment: environment))
        #expect(config.stateDirectory != "ampel-state")
    }

    @Test("a state_dir in the file wins over the defaults; --state-dir and AMPEL_STATE_DIR win over the file")
    func explicitWins() throws {
        let systemd = ["STATE_DIRECTORY": "/var/lib/ampel", "HOME": "/home/x"]
        #expect(try DaemonConfiguration.load(yaml: "state_dir: ampel-state\n", environment: systemd).stateDirectory == "ampel-state")
        #expect(try DaemonConfiguration.load(yaml: "state_dir: ampel-state\n", environment: systemd.merging(["AMPEL_STATE_DIR": "/srv/a"]) { $1 })
            .stateDirectory == "/srv/a")
        #expect(try DaemonConfiguration.load(yaml: "state_dir: /srv/file\n", environment: systemd, flags: .init(stateDir: "ampel-state"))
            .stateDirectory == "ampel-state")
    }

    @Test("ampel run takes the sources check and districts take, bundled included")
    func sources() throws {
        for name in ["bundled", "snapshot", "history", "rki", "arcgis"] {
            #expect(try DaemonConfiguration.load(yaml: nil, flags: .init(source: name)).data.source.rawValue == name)
        }
        #expect(try DaemonConfiguration.load(yaml: "data:\n  source: bundled\n").data.source == .bundled)
        let error = #expect(throws: ConfigurationError.self) { try DaemonConfiguration.load(yaml: nil, flags: .init(source: "web")) }
        #expect(error?.description == "--source: 'web' is not a data source (rki, arcgis, snapshot, history, bundled)")
    }
}
