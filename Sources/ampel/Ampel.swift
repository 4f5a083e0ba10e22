import AmpelDomain
import ArgumentParser

/// The `ampel` command: the daemon and its tools.
@main
struct Ampel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ampel",
        abstract: "Corona traffic-light signals for device positions (Bavaria, autumn 2020).",
        discussion: """
            Example:
              ampel check --lat 48.1374 --lon 11.5755
            """,
        version: AmpelVersion.current,
        subcommands: [Check.self, Districts.self, States.self, Rules.self, Resolve.self, Fetch.self, Lamp.self, Run.self, Replay.self]
    )
}
