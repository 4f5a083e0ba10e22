import AmpelDaemon
import AmpelData
import AmpelDomain
import ArgumentParser
import Foundation
import Logging

/// `ampel replay`: the daemon on the bundled history, one publication day every few seconds.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the daemon on the bundled RKI history with a simulated clock: one publication day every --day-seconds.",
        discussion: """
            The daemon of `ampel run` with its configuration, on the bundled daily history \
            (2020-11-18 to 2021-11-22), one day after the other; bridge/info says source "replay" and the day. \
            A replay stays apart from production: its own client id and topics (ampel-replay, \
            --client-id and --base-topic to choose, --production-topics for the configuration's own), \
            no Home Assistant discovery, webhooks, OwnTracks notices or lamps unless asked \
            (--discovery, --webhooks, --owntracks-notices, --lamps), and its state in <state dir>/replay. \
            Positions keep their own clock: fix ages and dwell times are real time. See docs/cli.md.

            Example:
              ampel replay --from 2021-03-01 --to 2021-05-31 --day-seconds 1
            """)

    @Option(name: .long, help: "The first day, YYYY-MM-DD (default: the first bundled day, 2020-11-18).")
    var from: String?

    @Option(name: .long, help: "The last day, YYYY-MM-DD; the daemon stays on it (default: the last bundled day, 2021-11-22).")
    var to: String?

    @Option(name: .customLong("day-seconds"), help: "Seconds per publication day; fractions allowed.")
    var daySeconds: Double = 2

    @OptionGroup var daemon: DaemonOptions

    @Option(name: .customLong("state-dir"), help: "The state directory; the replay keeps its state in its replay/ subdirectory (default: $AMPEL_STATE_DIR, else $STATE_DIRECTORY, $XDG_STATE_HOME/ampel or ~/.local/state/ampel).")
    var stateDir: String?

    @Option(name: .customLong("client-id"), help: "The MQTT client id (default: ampel-replay, so a running daemon keeps its session).")
    var clientID: String?

    @Option(name: .customLong("base-topic"), help: "The first level of every topic the replay writes (default: ampel-replay).")
    var baseTopic: String?

    @Flag(name: .customLong("production-topics"), help: "Write to the configuration's topics with its client id and Home Assistant discovery, as `ampel run` does.")
    var productionTopics = false

    @Flag(name: .long, help: "Announce the replay's entities to Home Assistant (default: not).")
    var discovery = false

    @Flag(name: .long, help: "POST alerts to the configured webhooks (default: none).")
    var webhooks = false

    @Flag(name: .customLong("owntracks-notices"), help: "Send alerts to OwnTracks phones as transitions and cards (default: none).")
    var owntracksNotices = false

    @Flag(name: .long, help: "Drive the configured lamps (default: none).")
    var lamps = false

    @Option(name: .long, help: "Where the HTTP server listens (host:port), or false for none (default: the configuration's).")
    var http: String?

    /// What a replay leaves out unless asked, and why, for the line it logs at start.
    static let apart = "no webhooks, OwnTracks notices, lamps or Home Assistant discovery unless asked"

    func validate() throws {
        for (flag, value) in [("--from", from), ("--to", to)] {
            if let value, Day(iso: value) == nil { throw ValidationError("\(flag) must be a day YYYY-MM-DD, got '\(value)'") }
        }
        if let baseTopic, baseTopic.isEmpty || baseTopic.contains(where: { "+#\u{0}".contains($0) }) {
            throw ValidationError("--base-topic must be a topic without wildcards, got '\(baseTopic)'")
        }
        if productionTopics, clientID != nil || baseTopic != nil {
            throw ValidationError("--production-topics takes the configuration's client id and topics: leave out --client-id and --base-topic")
        }
        if let from, let to, let a = Day(iso: from), let b = Day(iso: to), b < a {
            throw ValidationError("--to \(to) is before --from \(from)")
        }
        guard daySeconds.isFinite, daySeconds >= 0.01, daySeconds <= 86_400 else {
            throw ValidationError("--day-seconds must be from 0.01 to 86400, got \(daySeconds)")
        }
    }

    func run() async throws {
        let flags = ConfigurationOverrides(broker: daemon.broker, stateDir: stateDir, lang: daemon.lang, logLevel: daemon.logLevel, http: http,
                                           rules: daemon.rules)
        var said: [String] = []
        let from = self.from.flatMap(Day.init(iso:))
        let to = self.to.flatMap(Day.init(iso:))
        let pause = Duration.milliseconds(Int64((daySeconds * 1000).rounded()))
        let prepared = try Run.prepare(config: daemon.config, flags: flags, adjust: { configuration in
            // Apart from a real daemon's state: the replay's phases and journal are of 2020/21.
            configuration.stateDirectory = URL(fileURLWithPath: configuration.stateDirectory).appendingPathComponent("replay").path
            // Apart from production's topics, session and consumers: a replay with the daemon's
            // configuration republished 768 district states of 2020/21 to the real retained
            // topics within seconds, took over its session and fired its webhooks.
            if !productionTopics {
                configuration.mqtt.clientID = clientID ?? "ampel-replay"
                configuration.baseTopic = baseTopic ?? "ampel-replay"
                configuration.bridgeTopic = nil
                configuration.homeAssistant.discovery = discovery
                // Nothing should queue for a replay that is not running.
                configuration.mqtt.sessionExpiry = .seconds(60)
            }
            if !webhooks { configuration.notify.webhooks = [] }
            if !owntracksNotices { configuration.notify.owntracks = false }
            if !lamps { configuration.lamps = [] }
            said = [
                "client id \(configuration.mqtt.clientID)", "topics under \(configuration.baseTopic)/",
                "Home Assistant discovery \(configuration.homeAssistant.discovery ? "on" : "off")",
                "webhooks \(configuration.notify.webhooks.isEmpty ? "none" : configuration.notify.webhooks.map(\.name).joined(separator: ","))",
                "OwnTracks notices \(configuration.notify.owntracks ? "on" : "off")", "lamps \(configuration.lamps.count)",
                "state in \(configuration.stateDirectory)",
            ]
        }, feed: { ruleSet in
            do throws(DataError) {
                return try ReplayFeed(from: from, to: to, daySeconds: pause, ruleSet: ruleSet)
            } catch {
                throw ConfigurationError(key: "--from", line: nil, message: error.message)
            }
        })
        Logger(label: "ampel").notice("replay: \(said.joined(separator: ", "))", metadata: ["leftOut": "\(Self.apart)"])
        try await Run.run(prepared)
    }
}
