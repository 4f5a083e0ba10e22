import AmpelTestSupport
import Foundation
import Testing

/// `--broker` of `ampel run` and `ampel lamp`: one parser, so the same text names the same
/// broker to both commands, or is rejected by both before anything connects.
///
/// The accepted URLs point at a closed port on the loopback interface: `ampel run
/// --check-config` prints the broker it read, `ampel lamp` tries it once and reports the broker
/// it could not reach. Both print the parsed URL without credentials, so the two lines must agree.
@Suite struct BrokerOptionTests {
    @Test(arguments: [
        ("mqtt://127.0.0.1:1", "mqtt://127.0.0.1:1"),
        ("MQTT://127.0.0.1:1/", "mqtt://127.0.0.1:1"),
        ("tcp://ampel:p%3Ass@127.0.0.1:1", "mqtt://127.0.0.1:1"),
        ("mqtt://ampel:p@ss@127.0.0.1:1", "mqtt://127.0.0.1:1"),
        ("mqtts://127.0.0.1:1", "mqtts://127.0.0.1:1"),
        ("mqtt://[::1]:1", "mqtt://[::1]:1"),
        ("mqtt://127.0.0.1:1, mqtt://127.0.0.1:2", "mqtt://127.0.0.1:1,mqtt://127.0.0.1:2"),
    ])
    func bothCommandsReadTheSameBroker(url: String, parsed: String) async throws {
        let state = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: state) }
        let run = try await AmpelBinary.run(plain: ["run", "--broker", url, "--state-dir", state.path, "--check-config"])
        #expect(run.exitCode == 0, "\(url): \(run.stderrText)")
        #expect(run.stdoutText.contains("broker: \(parsed)\n"), "\(url): \(run.stdoutText)")
        #expect(!run.stdoutText.contains("ss@"), "no credentials in the summary")

        let lamp = try LampProcess.start(["lamp", "--json", "--district", "09162", "--broker", url])
        let status = try await lamp.wait(timeout: .seconds(30))
        var lines: [String] = []  // to the end of the stream: the exit may be seen before the last line
        while let line = await lamp.errors.next(timeout: .seconds(10)) { lines.append(line) }
        let stderr = lines.joined(separator: "\n")
        #expect(status == 1, "\(url): \(stderr)")
        #expect(stderr.contains("cannot follow \(parsed):"), "\(url): \(stderr)")
    }

    @Test(arguments: [
        "127.0.0.1:1883",  // no scheme
        "http://127.0.0.1",
        "mqtt://127.0.0.1:",  // an unset port variable, not the default port
        "mqtt://127.0.0.1:0",
        "mqtt://127.0.0.1:65536",
        "mqtt://127.0.0.1/ampel",
        "mqtt://127.0.0.1#x",
        "mqtt://:secret@127.0.0.1",
        "mqtt://bro<ker",
        "mqtt://b\u{FC}cher.example",
    ])
    func bothCommandsRejectTheSameBroker(url: String) async throws {
        let state = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: state) }
        let run = try await AmpelBinary.run(plain: ["run", "--broker", url, "--state-dir", state.path, "--check-config"])
        #expect(run.exitCode == 78, "\(url): \(run.stdoutText)")
        #expect(run.stderrText.contains("--broker: invalid broker URL"), "\(url): \(run.stderrText)")

        let lamp = try await AmpelBinary.run(plain: ["lamp", "--json", "--district", "09162", "--broker", url])
        #expect(lamp.exitCode == 64, "\(url): \(lamp.stderrText)")
        #expect(lamp.stderrText.contains("Bad --broker: invalid broker URL"), "\(url): \(lamp.stderrText)")
    }

    @Test(arguments: [
        ("mqtt://127.0.0.1:1,mqtts://127.0.0.1:2", "uses TLS and mqtt://127.0.0.1:1 does not"),
        ("mqtt://a:b@127.0.0.1:1,mqtt://a:c@127.0.0.1:2", "different credentials"),
        ("mqtt://127.0.0.1:1,mqtt://127.0.0.1:1", "listed twice"),
        ("mqtt://127.0.0.1:1,", "an empty entry"),
    ])
    func bothCommandsRejectTheSameBrokerList(list: String, why: String) async throws {
        let state = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: state) }
        let run = try await AmpelBinary.run(plain: ["run", "--broker", list, "--state-dir", state.path, "--check-config"])
        #expect(run.exitCode == 78, "\(list): \(run.stdoutText)")
        #expect(run.stderrText.contains("--broker: invalid broker list") && run.stderrText.contains(why), "\(list): \(run.stderrText)")

        let lamp = try await AmpelBinary.run(plain: ["lamp", "--json", "--district", "09162", "--broker", list])
        #expect(lamp.exitCode == 64, "\(list): \(lamp.stderrText)")
        #expect(lamp.stderrText.contains("Bad --broker: invalid broker list") && lamp.stderrText.contains(why), "\(list): \(lamp.stderrText)")
    }
}
