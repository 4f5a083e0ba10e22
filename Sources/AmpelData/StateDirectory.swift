import Foundation

/// The one default state directory of every command: `ampel run` keeps its state, journal,
/// data cache and history there, `ampel fetch` fills the same cache, and `check` and
/// `districts` answer from it when the RKI service fails. One resolution for all of them, so
/// an `ampel fetch` without flags feeds the daemon that runs without them.
///
/// In order: `$AMPEL_STATE_DIR`; systemd's `$STATE_DIRECTORY` (`StateDirectory=` in the unit,
/// the first of several); `$XDG_STATE_HOME/ampel`; `~/.local/state/ampel`. An explicit
/// `--state-dir` (and `state_dir` in the daemon's file) wins over all of these.
public enum StateDirectory {
    /// The directory the environment names, as an absolute path where the environment gives one.
    public static func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let dir = environment["AMPEL_STATE_DIR"], !dir.isEmpty {
            return URL(fileURLWithPath: dir, isDirectory: true)
        }
        if let dirs = environment["STATE_DIRECTORY"], let first = dirs.split(separator: ":").first {
            return URL(fileURLWithPath: String(first), isDirectory: true)
        }
        // The XDG spec ignores a relative XDG_STATE_HOME: it would depend on the working directory.
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return URL(fileURLWithPath: state, isDirectory: true).appendingPathComponent("ampel", isDirectory: true)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        return URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".local/state/ampel", isDirectory: true)
    }

    /// ``resolve(environment:)`` as a path.
    public static func path(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        resolve(environment: environment).path
    }

    /// The daemon's own default while it had one apart from the other commands' (`./ampel-state`,
    /// relative to the working directory): reachable by naming it (`--state-dir ampel-state`,
    /// `state_dir: ampel-state`); `ampel run` warns when it finds a state there it does not use.
    public static let formerDaemonDefault = "ampel-state"
}
