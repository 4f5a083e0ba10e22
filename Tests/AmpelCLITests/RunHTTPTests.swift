import AmpelTestSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// One answer of the daemon's HTTP server.
struct HTTPAnswer {
    let status: Int
    let body: Data
    let headers: [String: String]

    var text: String { String(decoding: body, as: UTF8.self) }
    func object() throws -> [String: Any] { try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any], "\(text)") }
    func array() throws -> [[String: Any]] { try #require(try JSONSerialization.jsonObject(with: body) as? [[String: Any]], "\(text)") }
    /// The body as a JSON object, or nil: for an answer that may not be one yet.
    var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }
}

/// A GET to the daemon (URLSession, a real client on a real socket).
func httpGet(_ url: String, headers: [String: String] = [:]) async throws -> HTTPAnswer {
    try await httpRequest("GET", url, headers: headers)
}

/// A request to an HTTP server of the tests (the daemon's, Home Assistant's).
/// - Parameter timeout: how long the answer may take; URLSession's default (60 s) otherwise.
func httpRequest(_ method: String, _ url: String, headers: [String: String] = [:], body: Data? = nil,
                 timeout: TimeInterval? = nil) async throws -> HTTPAnswer {
    var request = URLRequest(url: try #require(URL(string: url)))
    request.httpMethod = method
    if let timeout { request.timeoutInterval = timeout }
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    request.httpBody = body
    let (data, response) = try await URLSession.shared.data(for: request)
    let http = try #require(response as? HTTPURLResponse)
    var fields: [String: String] = [:]
    for (name, value) in http.allHeaderFields { fields["\(name)".lowercased()] = "\(value)" }
    return HTTPAnswer(status: http.statusCode, body: data, headers: fields)
}

/// Asks until `done` holds for an answer (the status view follows the loop at each tick).
func httpAwait(_ url: String, headers: [String: String] = [:], _ what: String, timeout: Duration = .seconds(30),
               until done: @escaping @Sendable (HTTPAnswer) -> Bool) async throws -> HTTPAnswer {
    let deadline = ContinuousClock.now + timeout
    while true {
        let answer = try await httpGet(url, headers: headers)
        if done(answer) { return answer }
        guard ContinuousClock.now < deadline else { throw TestTimeout(description: "timed out after \(timeout): \(what); last answer \(answer.status) \(answer.text.prefix(300))") }
        await threadSleep(for: .milliseconds(100))
    }
}

/// `ampel run`'s HTTP server against a real mosquitto: every route, its errors, auth beyond
/// loopback, positions hidden by default, paging 100,000 devices, and a forgotten device.
@Suite("ampel run serves HTTP (built binary, real mosquitto)")
struct RunHTTPTests {
    static func retained(_ broker: MosquittoBroker, _ topic: String) async throws -> String {
        try await MosquittoBroker.runTool("/usr/bin/mosquitto_sub", ["-h", broker.host, "-p", "\(broker.port)", "-t", topic, "-C", "1", "-W", "30"])
            .trimmingCharacters(in: .newlines)
    }

    @Test("every route answers with the objects the topics carry, and each error case with its status and a JSON reason")
    func routes() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // Texts in the states, so the district topic is the API's object (which always has them).
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.path, "--date", "2020-10-15"],
                             configuration: DaemonProcess.replayConfiguration + "outputs:\n  texts_in_state: true\n") { daemon in
            let base = try await daemon.httpURL()

            let health = try await httpGet(base + "/healthz")
            #expect(health.status == 200)
            _ = try await httpAwait(base + "/readyz", "ready") { $0.status == 200 }

            // A district: byte for byte the retained state topic.
            let districts = try await httpGet(base + "/api/districts")
            #expect(districts.status == 200)
            #expect(districts.headers["content-type"] == "application/json")
            let all = try districts.array()
            #expect(all.count == 96)
            let muenchen = try await httpGet(base + "/api/districts/09162")
            #expect(muenchen.status == 200)
            #expect(muenchen.text == (try await Self.retained(broker, "ampel/district/09162/state")))
            #expect(try muenchen.object()["phase"] as? String == "red")

            let history = try await httpGet(base + "/api/districts/09162/history")
            #expect(history.status == 200)
            let days = try #require(try history.object()["days"] as? [[String: Any]])
            #expect(days.first?["date"] as? String == "2020-11-18")
            #expect(days.last?["date"] as? String == "2021-11-22")
            #expect(days.allSatisfy { ["green", "yellow", "red", "darkred"].contains($0["phase"] as? String ?? "") })

            for (path, status) in [("/api/districts/9162", 400), ("/api/districts/abcde", 400), ("/api/districts/08111", 404),
                                   ("/api/districts/08111/history", 404), ("/api/devices/nobody", 404), ("/api/devices?limit=0", 400),
                                   ("/api/devices?limit=1001", 400), ("/api/devices?limit=ten", 400), ("/api/devices?cursor=%25%25", 400),
                                   ("/api/signal?lat=48.1", 400), ("/api/signal?lat=91&lon=11", 400), ("/api/signal?lat=abc&lon=11", 400),
                                   ("/api/signal?lat=48&lon=nan", 400)] {
                let answer = try await httpGet(base + path)
                #expect(answer.status == status, "\(path): \(answer.status) \(answer.text)")
                let error = try answer.object()
                #expect(error["error"] is String && !((error["reason"] as? String) ?? "").isEmpty, "\(path): \(answer.text)")
            }

            // The check for a position, from the index: München red, Stuttgart outside.
            let signal = try await httpGet(base + "/api/signal?lat=48.1374&lon=11.5755")
            #expect(signal.status == 200)
            #expect(try signal.object()["phase"] as? String == "red")
            #expect((try signal.object()["district"] as? [String: Any])?["ags"] as? String == "09162")
            let stuttgart = try await httpGet(base + "/api/signal?lat=48.7758&lon=9.1829&lang=de")
            #expect(try stuttgart.object()["phase"] as? String == "outside")
            #expect(try stuttgart.object()["lang"] as? String == "de")

            // A device: its district, not its position (http.show_positions is off).
            try await Scene.publish(broker, [("ampel/location/alice", #"{"lat":48.1374,"lon":11.5755,"tst":1000}"#)])
            try await Scene.publish(broker, [("ampel/location/bob", "not json")])
            let devices = try await httpAwait(base + "/api/devices", "alice in the device list") { $0.text.contains(#""alice""#) }
            let list = try devices.object()
            #expect(list["total"] as? Int ?? 0 >= 1)
            #expect(list["next"] is NSNull)
            let alice = try #require((list["devices"] as? [[String: Any]])?.first)
            #expect(alice["lat"] == nil && alice["lon"] == nil, "\(alice)")
            #expect((alice["district"] as? [String: Any])?["ags"] as? String == "09162")
            #expect(alice["phase"] as? String == "red")
            try await Scene.publish(broker, [("owntracks/carol/phone", #"{"_type":"location","lat":48.7758,"lon":9.1829,"tst":1000}"#)])
            let carol = try await httpAwait(base + "/api/devices/carol/phone", "a key with a slash") { $0.status == 200 }
            #expect(try carol.object()["phase"] as? String == "outside")
            let one = try await httpGet(base + "/api/devices/alice")
            #expect(one.status == 200)
            #expect(try one.object()["device"] as? String == "alice")
            #expect(!one.text.contains("48.1374"))

            // The bridge: bridge/info as retained, the dropped payload in the error log.
            let bridge = try await httpAwait(base + "/api/bridge", "the dropped payload in the error log") { $0.text.contains("not-json") }
            let object = try bridge.object()
            let errors = try #require(object["errors"] as? [[String: Any]])
            #expect(errors.contains { $0["kind"] as? String == "dropped" && $0["reason"] as? String == "not-json" && $0["topic"] as? String == "ampel/location/bob" })
            let info = try #require(object["info"] as? [String: Any])
            #expect(info["devices"] as? Int == 2)
            #expect(object["ready"] as? Bool == true)

            // /metrics through the reference parser.
            let metrics = try await httpAwait(base + "/metrics", "both devices counted in /metrics") { $0.text.contains("ampel_devices 2") }
            #expect(metrics.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            let families = try await Self.parsePrometheus(metrics.text)
            for name in ["ampel_messages_received", "ampel_messages_accepted", "ampel_messages_dropped", "ampel_messages_published", "ampel_alerts",
                         "ampel_devices", "ampel_districts", "ampel_data_age_seconds", "ampel_data_refresh_failures", "ampel_mqtt_connected",
                         "ampel_mqtt_reconnects", "ampel_lookup_duration_seconds", "ampel_message_handling_duration_seconds",
                         "ampel_process_resident_memory_bytes", "ampel_devices_forgotten"] {
                #expect(families[name] != nil, "\(name) missing from \(families.keys.sorted())")
            }
            #expect(families["ampel_districts"]?.contains(#"phase="red""#) == true)
            // Per district for Grafana: 96 incidences and phase ranks, SK München's as its state says.
            let munich = try (try await httpGet(base + "/api/districts/09162")).object()
            let incidences = try #require(families["ampel_district_incidence"]).split(separator: "\n")
            #expect(incidences.count == 96, "\(incidences.prefix(2))")
            #expect(incidences.contains { $0.contains(#"ags="09162""#) && $0.contains("name=") && $0.hasSuffix(" \(munich["incidence"] as? Double ?? -1)") },
                    "\(incidences.filter { $0.contains("09162") })")
            let ranks = try #require(families["ampel_district_phase_rank"]).split(separator: "\n")
            #expect(ranks.count == 96)
            let rank = ["green": 0, "yellow": 1, "red": 2, "darkred": 3][munich["phase"] as? String ?? ""] ?? -1
            #expect(ranks.contains { $0.contains(#"ags="09162""#) && $0.hasSuffix(" \(rank).0") }, "\(ranks.filter { $0.contains("09162") })")
            #expect(families["ampel_messages_dropped"]?.contains(#"reason="not-json""#) == true)

            let status = try await daemon.stop()
            #expect(status.exitCode == 0, "\(daemon.stderr)")
        }
    }

    /// The exposition through `prometheus_client.parser` (python3-prometheus-client, from
    /// scripts/install-deps.sh): family name -> its samples, one line each.
    static func parsePrometheus(_ text: String) async throws -> [String: String] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-metrics-\(UUID().uuidString).txt")
        try text.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let script = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            out = {}
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                out[family.name] = "\\n".join(f"{s.name} {json.dumps(s.labels, sort_keys=True)} {s.value}".replace('": "', '="') for s in family.samples)
            print(json.dumps(out))
            """
        let output = try await MosquittoBroker.runTool("/usr/bin/python3", ["-c", script, file.path])
        return try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: String], "\(output)")
    }

    @Test("beyond loopback: no start without http.auth (exit 78); with a token every route but the health checks asks for it")
    func authBeyondLoopback() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let refused = try await AmpelBinary.run(plain: ["run", "--http", "0.0.0.0:0", "--broker", "mqtt://127.0.0.1:1", "--state-dir", dir.path])
        #expect(refused.exitCode == 78)
        #expect(refused.stderrText.contains("http.auth"), "\(refused.stderrText)")

        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.path, "--http", "0.0.0.0:0"],
                             environment: ["AMPEL_HTTP_TOKEN": "t0ken"]) { daemon in
            let base = try await daemon.httpURL().replacingOccurrences(of: "0.0.0.0", with: "127.0.0.1")
            _ = try await httpAwait(base + "/readyz", "ready") { $0.status == 200 }
            #expect(try await httpGet(base + "/healthz").status == 200)
            for path in ["/api/districts", "/api/devices", "/api/bridge", "/metrics", "/api/signal?lat=48&lon=11"] {
                let none = try await httpGet(base + path)
                #expect(none.status == 401, "\(path) \(none.status)")
                #expect(try none.object()["error"] as? String == "Unauthorized")
                #expect(none.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
                #expect(try await httpGet(base + path, headers: ["Authorization": "Bearer wrong"]).status == 401)
                let authorized = try await httpGet(base + path, headers: ["Authorization": "Bearer t0ken"])
                #expect(authorized.status == 200, "\(path): \(authorized.text)")
            }
            let status = try await daemon.stop()
            #expect(status.exitCode == 0, "\(daemon.stderr)")
        }
    }

    @Test("a start with the HTTP port in use exits 78 naming http.listen, and publishes nothing to the broker")
    func portInUse() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        // Another program holds the port.
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0)
        #expect(listen(holder, 1) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(holder, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        // A retained sentinel: the only retained message before the start and after it.
        _ = try await MosquittoBroker.runTool("/usr/bin/mosquitto_pub", ["-h", broker.host, "-p", "\(broker.port)", "-r", "-t", "sentinel", "-m", "x"])
        let refused = try await AmpelBinary.run(plain: ["run", "--http", "127.0.0.1:\(port)", "--broker", broker.url, "--state-dir", dir.path,
                                          "--source", "snapshot", "--date", "2020-10-15"])
        #expect(refused.exitCode == 78)
        #expect(refused.stderrText.contains("http.listen: 127.0.0.1:\(port) is in use"), "\(refused.stderrText)")
        // Everything retained: `-W` ends the read (mosquitto_sub then exits non-zero).
        let (_, output) = try await ChildProcess.run("/usr/bin/mosquitto_sub", [
            "-h", broker.host, "-p", "\(broker.port)", "-t", "#", "-v", "--retained-only", "-W", "2",
        ])
        let retained = output.split(separator: "\n").filter { $0 != "Timed out" }.joined(separator: "\n")
        #expect(retained == "sentinel x", "the failed start published: \(retained)")
    }

    @Test("http.show_positions: true shows a device's position")
    func positionsShown() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.path],
                             configuration: DaemonProcess.replayConfiguration + "http:\n  show_positions: true\n") { daemon in
            let base = try await daemon.httpURL()
            try await daemon.awaitLog("subscribed")
            try await Scene.publish(broker, [("ampel/location/alice", #"{"lat":48.1374,"lon":11.5755,"tst":1000}"#)])
            let one = try await httpAwait(base + "/api/devices/alice", "alice") { $0.status == 200 }
            #expect(try one.object()["lat"] as? Double == 48.1374)
            #expect(try one.object()["lon"] as? Double == 11.5755)
            _ = try await daemon.stop()
        }
    }

    @Test("100,000 devices from a state file: cursor paging returns each once, in order; q= searches the keys")
    func paging() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let count = 100_000
        let districts = try await AmpelBinary.run(plain: ["districts", "--source", "snapshot", "--date", "2020-10-15", "--json"])
        let districtsFile = dir.appendingPathComponent("districts.json")
        try districts.stdoutText.write(to: districtsFile, atomically: true, encoding: .utf8)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Benchmarks/scale/gen_state.py")
        try await MosquittoBroker.runTool("/usr/bin/python3", [script.path, "--devices", "\(count)", "--districts", districtsFile.path,
                                                                "--out", dir.appendingPathComponent("state.json").path, "--prefix", "dev-"])
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.path, "--date", "2020-10-15"],
                             configuration: DaemonProcess.replayConfiguration + "homeassistant:\n  discovery: false\ndevices:\n  forget_after: false\n") { daemon in
            let base = try await daemon.httpURL(timeout: .seconds(120))
            _ = try await httpAwait(base + "/readyz", "ready", timeout: .seconds(120)) { $0.status == 200 }
            var seen: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let answer = try await httpGet(base + "/api/devices?limit=1000" + (cursor.map { "&cursor=\($0)" } ?? ""))
                #expect(answer.status == 200)
                let page = try answer.object()
                #expect(page["total"] as? Int == count)
                seen += (page["devices"] as? [[String: Any]] ?? []).compactMap { $0["device"] as? String }
                cursor = page["next"] as? String
                pages += 1
            } while cursor != nil && pages <= 200
            #expect(pages == 100)
            guard seen.count == count else {
                Issue.record("\(seen.count) keys in \(pages) pages, expected \(count)")
                return
            }
            #expect(Set(seen).count == count)
            // A Bool, not the arrays: a failed comparison of 100,000 keys would be diffed for minutes.
            let inOrder = seen == seen.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            #expect(inOrder)
            // dev-0012345 and dev-0012340..49 contain "0012345"? Only dev-0012345; "001234" matches ten.
            let search = try await httpGet(base + "/api/devices?q=DEV-001234&limit=5")
            let found = try search.object()
            #expect(found["total"] as? Int == 10)
            #expect((found["devices"] as? [[String: Any]])?.compactMap { $0["device"] as? String } == (0..<5).map { "dev-001234\($0)" })
            let rest = try await httpGet(base + "/api/devices?q=DEV-001234&limit=5&cursor=\(try #require(found["next"] as? String))")
            #expect((try rest.object()["devices"] as? [[String: Any]])?.compactMap { $0["device"] as? String } == (5..<10).map { "dev-001234\($0)" })
            #expect(try rest.object()["next"] is NSNull)
            _ = try await daemon.stop()
        }
    }

    @Test("a device silent for devices.forget_after is forgotten: no retained topic of it stays on the broker, and a restart does not bring it back")
    func forgetAfter() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let configuration = DaemonProcess.replayConfiguration + "devices:\n  forget_after: 2s\n"
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.path], configuration: configuration) { daemon in
            let base = try await daemon.httpURL()
            try await daemon.awaitLog("subscribed")
            // Read live, from before the first fix: a device may be forgotten 2 s after it, sooner
            // than a reader started afterwards gets its retained topics on a loaded machine.
            let (aliceState, carolCard) = ("ampel/device/alice/state", "owntracks/carol/ampel/info")
            let collector = try Scene.Collector(broker, topics: [aliceState, carolCard, "ampel/bridge/state"])
            defer { collector.process.signal(SIGKILL) }
            try await collector.awaitBridge()
            let now = Int(Date().timeIntervalSince1970)
            try await Scene.publish(broker, [("ampel/location/alice", #"{"lat":48.1374,"lon":11.5755,"tst":\#(now)}"#)])
            // An OwnTracks phone: its user gets a retained card as well.
            try await Scene.publish(broker, [("owntracks/carol/phone", #"{"_type":"location","lat":48.1374,"lon":11.5755,"tst":\#(now),"tid":"CP"}"#)])
            // Published while known: the state and carol's card (their discovery configs with them).
            try await collector.wait("alice's state and carol's card") { records in
                records.contains { $0.topic == aliceState && $0.payload.contains(#""device":"alice""#) }
                    && records.contains { $0.topic == carolCard && $0.payload.contains(#""_type":"card""#) }
            }
            try await daemon.awaitLog("forgot devices", timeout: .seconds(30))
            _ = try await httpAwait(base + "/api/devices/alice", "alice gone from the API") { $0.status == 404 }
            let info = try await httpAwait(base + "/api/bridge", "forgotten counted") { $0.text.contains(#""forgotten":2"#) }
            #expect(info.status == 200)
            // A fresh subscriber gets every retained message at once; none may be alice's or carol's.
            let left = try await HomeAssistantDiscoveryTests.retained(broker, topics: ["ampel/device/#", "homeassistant/#", "owntracks/#"])
            #expect(!left.contains { "\($0.topic) \($0.payload)".contains("alice") || "\($0.topic) \($0.payload)".contains("carol") }, "\(left.map(\.topic))")
            #expect(left.contains { $0.topic == "homeassistant/sensor/ampel/district_09162/config" }, "the subscriber read the retained messages")
            let status = try await daemon.stop()
            #expect(status.exitCode == 0)
        }

        // The next start knows nothing of alice (state file and journal agree).
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.path], configuration: configuration) { again in
            let url = try await again.httpURL()
            _ = try await httpAwait(url + "/readyz", "ready") { $0.status == 200 }
            let gone = try await httpAwait(url + "/api/devices", "the device list") { $0.status == 200 }
            #expect(try gone.object()["total"] as? Int == 0, "\(gone.text)")
            _ = try await again.stop()
        }
    }
}
