import AmpelCore
import AmpelDaemon
import AmpelLamp
import AmpelMQTT
import AmpelMessages
import ArgumentParser
import Dispatch
import Foundation
import Logging

/// `ampel lamp`: the Ampel lamp in a terminal, driven by the same state machine as the board.
///
/// It subscribes to the lamp's topics on a live broker and feeds every message, the
/// connection state and a 50 ms tick into ``LampStateMachine``; the terminal shows
/// ``LampStateMachine/frame(at:)``, `--json` prints ``LampPattern/jsonLine`` on every
/// pattern change. Nothing here decides what the lamp shows.
struct Lamp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lamp",
        abstract: "Show an Ampel lamp in the terminal, following a district or a device.",
        discussion: """
            The lamp shows GREEN, YELLOW, RED steady, DARK RED blinking, blue for 'outside', \
            and slow blue blinking when there is no trustworthy signal (waiting, Ampel \
            offline, stale data). With --json, one line per pattern change (docs/lamp.md).

            Example:
              ampel lamp --broker mqtt://127.0.0.1:1883 --district 09162
            """
    )

    @Option(help: "The MQTT broker: mqtt://host:port, or mqtts://host:port for TLS (verified with the system CAs); the nodes of a cluster comma-separated, tried in order.")
    var broker: String = "mqtt://localhost:1883"

    @Option(help: "Follow this district (AGS, e.g. 09162).")
    var district: String?

    @Option(help: "Follow this device (its key, e.g. alice/phone).")
    var device: String?

    @Flag(help: "Print one JSON line per pattern change instead of drawing the lamp.")
    var json = false

    @Option(help: "The daemon's base topic.")
    var base: String = "ampel"

    func validate() throws {
        guard (district == nil) != (device == nil) else {
            throw ValidationError("Give exactly one of --district AGS or --device KEY.")
        }
        _ = try makeTopics()
        _ = try brokerURL()
    }

    /// `--broker` as ``MQTTBrokerList`` reads it, like `ampel run`'s `--broker` and `broker` key.
    private func brokerURL() throws -> MQTTBrokerList {
        do {
            return try MQTTBrokerList(parsing: broker)
        } catch {
            throw ValidationError("Bad --broker: \(error.message)")
        }
    }

    private func makeTopics() throws -> LampTopics {
        let follow: LampFollow = district != nil ? .district : .device
        let id = district ?? device ?? ""
        do {
            return try LampTopics(follow: follow, id: id, base: base)
        } catch {
            switch error {
            case .emptyID: throw ValidationError("The district or device id is empty.")
            case .emptyBase: throw ValidationError("--base is empty.")
            case .invalidTopic:
                throw ValidationError("'\(id)' under '\(base)' is not a valid topic (no + # or empty levels; an AGS has no /).")
            }
        }
    }

    func run() async throws {
        let topics = try makeTopics()
        let url = try brokerURL()
        let configuration = try MQTTConfiguration(
            brokers: url, clientID: "ampel-lamp-\(UInt32.random(in: 0...UInt32.max))",
            caFile: DaemonConfiguration.MQTTSettings.systemCAFile)
        // Connection notices would scribble over the drawn lamp; the lamp shows the link itself.
        var logger = Logger(label: "ampel.lamp.mqtt")
        logger.logLevel = json ? .warning : .critical
        let client = MQTTClient(configuration: configuration, logger: logger)
        do {
            try await client.connect()
            _ = try await client.subscribe(topics.subscriptions.map { (String(decoding: $0, as: UTF8.self), MQTTQoS.atLeastOnce) })
        } catch {
            await client.disconnect()
            FileHandle.standardError.write(Data("ampel lamp: cannot follow \(url): \(error)\n".utf8))
            throw ExitCode(1)
        }

        let output: any LampOutput = json
            ? JSONLampOutput()
            : TerminalLampOutput(caption: "\(district.map { "district \($0)" } ?? "device \(device ?? "")") · \(url)")
        let events = AsyncStream<LampEvent>.makeStream(bufferingPolicy: .unbounded)
        let clock = ContinuousClock()
        let start = clock.now
        @Sendable func milliseconds() -> UInt64 {
            let elapsed = clock.now - start
            return UInt64(max(0, elapsed.components.seconds)) * 1000
                + UInt64(max(0, elapsed.components.attoseconds / 1_000_000_000_000_000))
        }

        let stop = StopSignals { events.continuation.finish() }
        defer { stop.cancel() }

        // The connection and the messages are two streams; the lamp does not care which
        // comes first (a phase received before "connected" is remembered).
        let connection = Task {
            for await event in client.events {
                switch event {
                case .connected: events.continuation.yield(.link(up: true))
                case .disconnected: events.continuation.yield(.link(up: false))
                case .reconnectFailed: break
                }
            }
        }
        let messages = Task {
            for await message in client.messages {
                events.continuation.yield(.message(topic: Array(message.topic.utf8), payload: message.payload))
            }
        }
        // Blinking needs time to pass; the JSON lines only change with messages.
        let ticker: Task<Void, Never>? = json ? nil : Task {
            while !Task.isCancelled {
                events.continuation.yield(.tick(at: milliseconds()))
                try? await Task.sleep(for: .milliseconds(50))
            }
        }

        var lamp = LampStateMachine(topics: topics)
        if !json { _ = lamp.event(.powerOn(at: milliseconds())) }
        output.show(pattern: lamp.pattern, frame: lamp.frame(at: milliseconds()))
        for await event in events.stream {
            let action = lamp.event(event)
            let now = milliseconds()
            if case .show(let pattern) = action {
                output.show(pattern: pattern, frame: lamp.frame(at: now))
            } else {
                output.tick(pattern: lamp.pattern, frame: lamp.frame(at: now))
            }
        }
        ticker?.cancel()
        connection.cancel()
        messages.cancel()
        await client.disconnect()
        output.finish()
    }
}

/// Where the lamp is shown.
protocol LampOutput: Sendable {
    /// The pattern changed (also called once at start).
    func show(pattern: LampPattern, frame: LampFrame)
    /// Time passed; redraw if the frame changed.
    func tick(pattern: LampPattern, frame: LampFrame)
    /// The command ends: leave the terminal as it was.
    func finish()
}

/// Writes straight to file descriptor 1: no buffering, so a pipe sees each line at once.
private func writeOut(_ text: String) {
    FileHandle.standardOutput.write(Data(text.utf8))
}

/// `--json`: one line per pattern change.
struct JSONLampOutput: LampOutput {
    func show(pattern: LampPattern, frame: LampFrame) { writeOut(pattern.jsonLine + "\n") }
    func tick(pattern: LampPattern, frame: LampFrame) {}
    func finish() {}
}

/// Draws the four lights with ANSI colours and redraws them in place.
final class TerminalLampOutput: LampOutput, @unchecked Sendable {
    // Only touched from the command's event loop; @unchecked because the protocol is Sendable.
    private var drawn: (pattern: LampPattern, frame: LampFrame)?
    private let caption: String
    private static let height = 7

    init(caption: String) {
        self.caption = caption
        writeOut("\u{1B}[?25l")  // hide the cursor while drawing
    }

    func show(pattern: LampPattern, frame: LampFrame) { draw(pattern: pattern, frame: frame) }

    func tick(pattern: LampPattern, frame: LampFrame) {
        if let drawn, drawn.pattern == pattern, drawn.frame == frame { return }
        draw(pattern: pattern, frame: frame)
    }

    func finish() { writeOut("\u{1B}[?25h") }

    private func draw(pattern: LampPattern, frame: LampFrame) {
        var screen = drawn == nil ? "" : "\u{1B}[\(Self.height)A"
        for line in TerminalLampOutput.lines(pattern: pattern, frame: frame, caption: caption) {
            screen += "\r\u{1B}[2K" + line + "\n"
        }
        writeOut(screen)
        drawn = (pattern, frame)
    }

    /// The lamp as text lines (exactly ``height`` of them).
    static func lines(pattern: LampPattern, frame: LampFrame, caption: String) -> [String] {
        let palette = LampPalette.standard
        func light(_ light: LampLights, _ name: String, _ color: RGB) -> String {
            let on = frame.lit.contains(light)
            let paint = on ? "\u{1B}[38;2;\(color.red);\(color.green);\(color.blue)m" : "\u{1B}[38;2;55;55;55m"
            return "  │ \(paint)██████\u{1B}[0m │ \(on ? name : "")"
        }
        return [
            "  ┌────────┐",
            light(.red, "red", palette.red),
            light(.yellow, "yellow", palette.yellow),
            light(.green, "green", palette.green),
            light(.blue, "status", palette.blue),
            "  └────────┘",
            "  \u{1B}[1m\(words(pattern))\u{1B}[0m · \(caption)",
        ]
    }

    /// The pattern in words, for the caption line.
    static func words(_ pattern: LampPattern) -> String {
        switch pattern {
        case .lampTest: "LAMP TEST"
        case .phase(.green): "GREEN"
        case .phase(.yellow): "YELLOW"
        case .phase(.red): "RED"
        case .phase(.darkred): "DARK RED (blinking)"
        case .outside: "OUTSIDE the region: no Bavarian rules"
        case .noSignal(.waiting): "NO SIGNAL: waiting for Ampel"
        case .noSignal(.offline): "NO SIGNAL: Ampel offline"
        case .noSignal(.stale): "NO SIGNAL: data stale"
        }
    }
}

/// SIGINT and SIGTERM end the command cleanly (cursor back, broker disconnected).
final class StopSignals: @unchecked Sendable {
    // Created and cancelled by the command's task only.
    private var sources: [any DispatchSourceSignal] = []

    init(_ stop: @escaping @Sendable () -> Void) {
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: stop)
            source.resume()
            sources.append(source)
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
        sources.removeAll()
    }
}
