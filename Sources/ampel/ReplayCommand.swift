import AmpelDaemon
import AmpelData
import AmpelDomain
import ArgumentParser
import Foundation

/// `ampel replay`: the daemon on the bundled history, one publication day every few seconds.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the daemon on the bundled RKI history with a simulated clock: one publication day every --day-seconds.",
        discussion: """
            Everything behaves as in `ampel run` (districts, devices, lamps, Home Assistant, alerts, webhooks), \
            with the same configuration; only the data comes from the bundled daily history \
            (2020-11-18 to 2021-11-22), one day after the other, and bridge/info says source "replay" and the day. \
            Positions keep their own clock: fix ages and dwell times are real time. State is kept in \
            <state dir>/replay, apart from a real daemon's. See docs/cli.md.
            """)

    @Option(name: .long, help: "The first day (YYYY-MM-DD; default the first bundled day, 2020-11-18).")
    var from: String?

    @Option(name: .long, help: "The last day (YYYY-MM-DD; default the last bundled day, 2021-11-22). The daemon stays on it.")
    var to: String?

    @Option(name: .customLong("day-seconds"), help: "Seconds per publication day (default 2; fractions allowed).")
    var daySeconds: Double = 2

    @Option(name: .long, help: "The YAML configuration file (default: AMPEL_CONFIG, else none).")
    var config: String?

    @Option(name: .long, help: "Broker URL: mqtt://host:port, or mqtts://host:port for TLS.")
    var broker: String?

    @Option(name: .long, help: "The rule set: a bundled name (bavaria, bavaria-initial, notbremse-2021) or a JSON file.")
    var rules: String?

    @Option(name: .customLong("state-dir"), help: "The state directory; the replay keeps its state in its replay/ subdirectory.")
    var stateDir: String?

    @Option(name: .long, help: "Default language of texts: de or en.")
    var lang: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error, critical.")
    var logLevel: String?

    func validate() throws {
        for (flag, value) in [("--from", from), ("--to", to)] {
            if let value, Day(iso: value) == nil { throw ValidationError("\(flag) must be a day YYYY-MM-DD, got '\(value)'") }
        }
        if let from, let to, let a = Day(iso: from), let b = Day(iso: to), b < a {
            throw ValidationError("--to \(to) is before --from \(from)")
        }
        guard daySeconds.isFinite, daySeconds >= 0.01, daySeconds <= 86_400 else {
            throw ValidationError("--day-seconds must be from 0.01 to 86400, got \(daySeconds)")
        }
    }

    func run() async throws {
        let flags = ConfigurationOverrides(broker: broker, stateDir: stateDir, lang: lang, logLevel: logLevel, rules: rules)
        let from = self.from.flatMap(Day.init(iso:))
        let to = self.to.flatMap(Day.init(iso:))
        let pause = Duration.milliseconds(Int64((daySeconds * 1000).rounded()))
        let prepared = try Run.prepare(config: config, flags: flags, adjust: { configuration in
            // Apart from a real daemon's state: the replay's phases and journal are of 2020/21.
            configuration.stateDirectory = URL(fileURLWithPath: configuration.stateDirectory).appendingPathComponent("replay").path
        }, feed: { ruleSet in
            do throws(DataError) {
                return try ReplayFeed(from: from, to: to, daySeconds: pause, ruleSet: ruleSet)
            } catch {
                throw ConfigurationError(key: "--from", line: nil, message: error.message)
            }
        })
        try await Run.run(prepared)
    }
}
