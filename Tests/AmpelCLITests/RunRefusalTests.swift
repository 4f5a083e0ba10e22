import AmpelTestSupport
import Foundation
import Testing

/// What a secured broker refuses (mosquitto 2.0 with a password file and an ACL written here):
/// counted, said and never taken for a delivery; the built binary, a real mosquitto.
@Suite struct RunRefusalTests {
    /// Anonymous clients (the test's phone and reader) may do anything; the daemon's user
    /// `ampel` may write everything it needs but, in the first version, not `ampel/device/#`.
    static func acl(deviceTopics: Bool) -> String {
        var lines = ["topic readwrite #", "", "user ampel", "topic read ampel/#", "topic read owntracks/#", "topic read homeassistant/status",
                     "topic write ampel/bridge/#", "topic write ampel/district/#", "topic write ampel/rules/#", "topic write ampel/states/#",
                     "topic write homeassistant/#", "topic write owntracks/#"]
        if deviceTopics { lines.append("topic write ampel/device/#") }
        return lines.joined(separator: "\n") + "\n"
    }

    @Test("a publish the ACL refuses is counted by reason and topic class, logged with its topic, /readyz degraded, the alert kept; with the ACL fixed the next start delivers it once")
    func aclRefusalCountedAndRedeliveredAfterTheFix() async throws {
        let dir = try MosquittoBroker.makeTemporaryDirectory(prefix: "ampel-acl")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let passwords = try await MosquittoBroker.makePasswordFile(users: ["ampel": "secret"], in: dir)
        let aclFile = dir + "/acl"
        try Self.acl(deviceTopics: false).write(toFile: aclFile, atomically: true, encoding: .utf8)
        var options = Scene.Options()
        options.topics = ["ampel/device/#", "ampel/bridge/#"]
        options.broker = MosquittoBroker.Options(extraConfig: ["password_file \(passwords)", "acl_file \(aclFile)"])
        let httpPort = try MosquittoBroker.freeLoopbackPort()
        options.arguments = ["--http", "127.0.0.1:\(httpPort)"]
        let credentials = ["AMPEL_MQTT_USERNAME": "ampel", "AMPEL_MQTT_PASSWORD": "secret"]
        try await Scene.run(options) { scene in
            let daemon = try await scene.start(environment: credentials)
            try await scene.fix("alice/phone", at: RunCrashTests.muenchen, tst: Int(Date().timeIntervalSince1970), input: .owntracks)
            try await scene.collector.wait("bridge/info counting the refused alert and state") { records in
                records.contains { record in
                    guard record.topic == "ampel/bridge/info", let counters = Scene.Collector.field("counters", record.payload) as? [String: Any],
                          let refused = counters["refused"] as? [String: [String: Int]] else { return false }
                    return refused == ["notAuthorized": ["alert": 1, "state": 1]]
                }
            }
            #expect(!scene.collector.records().contains { $0.topic.hasPrefix("ampel/device/") }, "the broker delivered nothing it refused")
            try await daemon.awaitLog("the broker refused publishes")
            #expect(daemon.stderr.contains("ampel/device/alice/phone/"))
            #expect(daemon.stderr.contains("Not authorized"))
            let ready = try await httpGet("http://127.0.0.1:\(httpPort)/readyz")
            #expect(ready.status == 200)
            let readiness = try ready.object()
            #expect(readiness["status"] as? String == "degraded")
            #expect((readiness["reason"] as? String)?.contains("ampel/device/alice/phone") == true, "\(readiness)")
            let metrics = try await httpGet("http://127.0.0.1:\(httpPort)/metrics").text
            #expect(metrics.contains(#"ampel_publish_refused_total{reason="notAuthorized",class="alert"} 1"#)
                    || metrics.contains(#"ampel_publish_refused_total{class="alert",reason="notAuthorized"} 1"#), "\(metrics)")
            try await scene.stop()

            // The ACL fixed, the broker told: the next start sends the alert the journal still holds, once.
            try Self.acl(deviceTopics: true).write(toFile: aclFile, atomically: true, encoding: .utf8)
            scene.broker.reload()
            // mosquitto reloads on SIGHUP in its own time: the daemon starts once it has.
            try await scene.broker.waitForLog("Reloading config")
            let mark = scene.collector.mark
            let again = try await scene.start(environment: credentials)
            try await scene.collector.wait("alice's first-sighting alert after the fix", since: mark) { records in
                records.contains { $0.topic == "ampel/device/alice/phone/alert" }
            }
            try await scene.collector.wait("alice's state after the fix", since: mark) { records in
                records.contains { $0.topic == "ampel/device/alice/phone/state" }
            }
            try await again.awaitLog("alerts the last run handed over without an acknowledgement")
            try await scene.stop()
            #expect(scene.collector.records(since: mark).filter { $0.topic == "ampel/device/alice/phone/alert" }.count == 1)
        }
    }

    @Test("an input filter the broker refuses at SUBSCRIBE (mosquitto's dynamic security) is named in the log and /readyz; the other inputs serve")
    func refusedInputFilterNamedOthersServe() async throws {
        let dir = try MosquittoBroker.makeTemporaryDirectory(prefix: "ampel-dynsec")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // mosquitto's acl_file grants every SUBSCRIBE and filters at delivery; its dynamic
        // security plugin answers a denied filter in the SUBACK (0x87), as other brokers do.
        let config = dir + "/dynamic-security.json"
        _ = try await MosquittoBroker.runTool("/usr/bin/mosquitto_ctrl", ["dynsec", "init", config, "admin", "adminpw"])
        // Everyone may do everything by default (the scene's own clients are anonymous) ...
        var security = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: config))) as? [String: Any])
        security["defaultACLAccess"] = ["publishClientSend": true, "publishClientReceive": true, "subscribe": true, "unsubscribe": true]
        try JSONSerialization.data(withJSONObject: security).write(to: URL(fileURLWithPath: config))
        // Debian's mosquitto package ships the plugin in the architecture's library directory.
        let plugin = try #require(try FileManager.default.contentsOfDirectory(atPath: "/usr/lib").lazy
            .map { "/usr/lib/\($0)/mosquitto_dynamic_security.so" }.first { FileManager.default.fileExists(atPath: $0) },
                                  "mosquitto's dynamic security plugin (Debian package mosquitto)")
        var options = Scene.Options()
        options.topics = ["ampel/device/#", "ampel/bridge/#"]
        options.broker = MosquittoBroker.Options(extraConfig: ["plugin \(plugin)", "plugin_opt_config_file \(config)"])
        let httpPort = try MosquittoBroker.freeLoopbackPort()
        options.arguments = ["--http", "127.0.0.1:\(httpPort)"]
        try await Scene.run(options) { scene in
            // ... but the daemon's user may not read OwnTracks' topics.
            let commands = [
                ["createClient", "ampel", "-p", "secret"], ["createRole", "no-owntracks"],
                ["addRoleACL", "no-owntracks", "subscribePattern", "owntracks/#", "deny", "5"], ["addClientRole", "ampel", "no-owntracks"],
            ]
            for command in commands {
                _ = try await MosquittoBroker.runTool("/usr/bin/mosquitto_ctrl",
                                                      ["-p", "\(scene.broker.port)", "-u", "admin", "-P", "adminpw", "dynsec"] + command)
            }
            let daemon = try await scene.start(environment: ["AMPEL_MQTT_USERNAME": "ampel", "AMPEL_MQTT_PASSWORD": "secret"])
            try await daemon.awaitLog("the broker refused the input filter")
            #expect(daemon.stderr.contains("filter=owntracks/+/+"), "\(daemon.stderr)")
            // Ready once the start has published (every refusal said by then); degraded for the refused filter.
            let readiness = try await httpAwait("http://127.0.0.1:\(httpPort)/readyz", "ready") { $0.status == 200 }.object()
            #expect(!daemon.stderr.contains("filter=ampel/location/+"), "\(daemon.stderr)")
            #expect(readiness["status"] as? String == "degraded")
            #expect((readiness["reason"] as? String)?.contains("owntracks/+/+") == true, "\(readiness)")
            #expect((readiness["reason"] as? String)?.contains("ampel/location/+") == false, "\(readiness)")
            // The plain input still serves.
            let mark = scene.collector.mark
            try await scene.fix("bob", at: RunCrashTests.muenchen, tst: Int(Date().timeIntervalSince1970), input: .plain)
            try await scene.collector.wait("bob's state", since: mark) { records in
                records.contains { $0.topic == "ampel/device/bob/state" }
            }
            try await scene.stop()
        }
    }

    @Test("a wrong password at the first connect exits 78 naming the settings, on MQTT 5 and 3.1.1; a missing user name too", arguments: ["5", "3.1.1"])
    func wrongPasswordExits78(protocolVersion: String) async throws {
        let dir = try MosquittoBroker.makeTemporaryDirectory(prefix: "ampel-passwd")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let passwords = try await MosquittoBroker.makePasswordFile(users: ["ampel": "secret"], in: dir)
        let broker = try await MosquittoBroker.start(.init(passwordFile: passwords))
        defer { broker.stop() }
        let config = dir + "/ampel.yaml"
        try "mqtt:\n  protocol: \"\(protocolVersion)\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        for (environment, who) in [(["AMPEL_MQTT_USERNAME": "ampel", "AMPEL_MQTT_PASSWORD": "wrong"], "user 'ampel'"),
                                   ([:], "a client without a user name")] {
            let inherited = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("AMPEL_MQTT_") }
            // With the HTTP server up: its shutdown says nothing at error level before the reason.
            // Port 0: the kernel picks one, where a port picked free beforehand could be taken by
            // a test running beside this one before the daemon binds it.
            let http = "127.0.0.1:0"
            let run = try await AmpelBinary.run(["run", "--broker", broker.url, "--config", config, "--state-dir", dir + "/state", "--http", http],
                                                environment: inherited.merging(environment) { $1 })
            #expect(run.exitCode == 78, "\(run.stderrText)")
            #expect(run.stderrText.contains("Error: mqtt.username (or AMPEL_MQTT_USERNAME, or the user in the broker URL) and AMPEL_MQTT_PASSWORD"), "\(run.stderrText)")
            #expect(run.stderrText.contains(who), "\(run.stderrText)")
            #expect(!run.stderrText.contains("MQTTError"), "no internal type names: \(run.stderrText)")
            #expect(!run.stderrText.contains(" error "), "no error-level lines before the reason: \(run.stderrText)")
        }
    }
}
