import AmpelTestSupport
import Foundation
import Testing

/// deploy/ampel.example.yaml runs as it is against a local broker (its header promises it):
/// the built binary on that file, only the broker's port the test's (`--broker`, which wins
/// over the file), comes online and stops cleanly.
@Suite("deploy/ampel.example.yaml runs as it is (built binary, real mosquitto)")
struct ExampleConfigTests {
    static let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy/ampel.example.yaml")

    @Test("online on a local broker with the example file as it is, and a clean stop")
    func runsAsItIs() async throws {
        let text = try String(contentsOf: Self.example, encoding: .utf8)
        // The file's own broker, but for the port of this test's mosquitto.
        #expect(text.contains("\nbroker: mqtt://127.0.0.1:1883  # local\n"))
        try await Scene.run { scene in
            #expect(scene.broker.url == "mqtt://127.0.0.1:\(scene.broker.port)", "a broker on 127.0.0.1 as in the file")
            // A user's environment: no state directory named anywhere, so the file's default
            // (~/.local/state/ampel, here under XDG_STATE_HOME) must be one a user can create.
            // The HTTP server on a port of the system's choice (DaemonProcess's default): tests run
            // side by side, and 8080 may be another's.
            let state = scene.dir.appendingPathComponent("xdg")
            let environment = ["XDG_STATE_HOME": state.path, "HOME": scene.dir.appendingPathComponent("home").path,
                               "AMPEL_STATE_DIR": "", "STATE_DIRECTORY": ""]
            let mark = scene.collector.mark
            try await withDaemon(["--broker", scene.broker.url], environment: environment, configuration: text) { daemon in
                try await scene.collector.wait("ampel/bridge/state online", since: mark) { records in
                    records.contains { $0.topic == "ampel/bridge/state" && $0.payload.contains("online") }
                }
                try await daemon.awaitLog("subscribed")
                let info = try await scene.retainedInfo()
                #expect(info["ruleSet"] as? String == "bavaria", "\(info)")
                let status = try await scene.collector.stop(daemon)
                #expect(status.exitCode == 0, "\(daemon.stderr)")
                #expect(!daemon.stderr.contains(" error "), "\(daemon.stderr)")
                #expect(FileManager.default.fileExists(atPath: state.appendingPathComponent("ampel").path), "the default state directory")
            }
        }
    }
}
