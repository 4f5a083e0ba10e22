import AmpelData
import AmpelDomain
import AmpelTestSupport
import Foundation
import Testing

/// The status page in a real browser: Debian's headless Chromium, driven by Selenium
/// (`scripts/page-browser-check.py` in the venv `scripts/install-deps.sh` makes), loads the page
/// of `ampel run` on the bundled data of 2020-10-15 against a real mosquitto.
///
/// Checked in the rendered DOM: 96 district paths filled with the colours of that day's
/// phases (computed here from the bundled data and the rule set), and a location sent over
/// MQTT appearing in the device table without a reload; the page in the configured `lang`
/// although the browser is English, each device's language as its state carries it, a
/// webhook's counters as text (not `[object Object]`), and at 390 px no table wider than the
/// box it scrolls in, with every phase and last-fix cell inside it. The screenshots (light,
/// dark, narrow) go to a temporary directory, or into docs/images when `AMPEL_UPDATE_SCREENSHOTS=1`.
@Suite("The status page in headless Chromium (built binary, real mosquitto)")
struct PageBrowserTests {
    static let venv = ProcessInfo.processInfo.environment["AMPEL_SELENIUM_VENV"] ?? NSHomeDirectory() + "/.cache/ampel/selenium-venv-4.51.0"
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let script = repository.appendingPathComponent("scripts/page-browser-check.py").path

    /// The fill of every Bavarian district on 2020-10-15: the rule set's colour of the phase its
    /// incidence falls in, by AGS.
    static func expectedFills() throws -> [String: String] {
        let ruleSet = RuleSetCatalog.standard()
        let dataset = try BundledData.shared.snapshot(on: Day(iso: "2020-10-15"))
        var fills: [String: String] = [:]
        for entry in dataset.districts(in: .bavaria) {
            fills[entry.district.ags] = try ruleSet.classify(entry.incidence).color.hex
        }
        return fills
    }

    /// The JSON after `prefix` on a line of the browser script's output.
    static func reported(_ prefix: String, in output: String) -> Any? {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix(prefix + " ") }) else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(line.dropFirst(prefix.count + 1).utf8), options: [.fragmentsAllowed])
    }

    @Test("the map shows the day's phases, a new device appears without a reload, light and dark screenshots")
    func mapDevicesAndScreenshots() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.venv + "/.complete"), """
            Selenium's venv is missing at \(Self.venv): run scripts/install-deps.sh (it installs chromium,
            chromium-driver and selenium==4.51.0 into that venv)
            """)
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"), "chromium-driver is missing: run scripts/install-deps.sh")
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let webhooks = try await HTTPFixtureServer.start()
        defer { Task { try? await webhooks.shutdown() } }
        // Two lamps, so the screenshots show the lamp table filled; a webhook, whose counters
        // are an object in `bridge/info` (`counters.webhooks.gotify`); one device with a
        // language of its own configured, while the daemon speaks German (`--lang de`).
        let extra = """
            lamps:
              - {name: town-hall, driver: wled, topic: wled/townhall, district: "09162"}
              - {name: office, driver: tasmota, topic: tasmota/office, device: alice/phone}
            notify:
              webhooks:
                - {name: gotify, url: "\(webhooks.baseURL)/message"}
            devices:
              bob/car: {lang: en}

            """
        let daemon = try RunRecoveryTests.Daemon(["--broker", broker.url, "--state-dir", dir.appendingPathComponent("state").path,
                                                  "--source", "snapshot", "--date", "2020-10-15", "--lang", "de"],
                                                 configuration: extra + RunRecoveryTests.Daemon.replayConfiguration)
        let url = try await daemon.httpURL()
        try await daemon.awaitLog("subscribed")

        let fills = try Self.expectedFills()
        #expect(fills.count == 96)
        #expect(Set(fills.values).count >= 3, "the day colours the map with several phases")
        let expected = dir.appendingPathComponent("expected.json")
        try JSONSerialization.data(withJSONObject: fills, options: [.sortedKeys]).write(to: expected)
        let shots = ProcessInfo.processInfo.environment["AMPEL_UPDATE_SCREENSHOTS"] == "1"
            ? Self.repository.appendingPathComponent("docs/images") : dir
        try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)

        let output = Watched("")
        let (exits, continuation) = AsyncStream.makeStream(of: ChildProcess.Status.self)
        let browser = try ChildProcess(
            Self.venv + "/bin/python",
            [Self.script, "--url", url + "/?lang=en", "--default-url", url + "/", "--expected", expected.path, "--device", "alice/phone",
             "--also-device", "bob/car", "--also-device", "van-7", "--also-device", "field-team-vehicle-0042", "--shots", shots.path],
            output: .read { data in output.update { $0 += String(decoding: data, as: UTF8.self) } }, errors: .sameAsOutput,
            onExit: { status in
                continuation.yield(status)
                continuation.finish()
            })
        defer { browser.signal(SIGKILL) }
        try await withTimeout(.seconds(120), "the page loaded and its map checked") {
            await output.wait { $0.contains("READY") || $0.contains("Traceback") }
        }
        try #require(output.value.contains("READY"), "\(output.value)")

        // Sent only now, while the page is open: it must reach the table by the page's own polling.
        // Fixes of a minute ago, so the table's ages read as they would in use.
        let now = Int(Date().timeIntervalSince1970)
        for (topic, payload) in [
            ("owntracks/alice/phone", #"{"_type":"location","lat":48.1374,"lon":11.5755,"tst":\#(now - 42)}"#),
            ("owntracks/bob/car", #"{"_type":"location","lat":49.4521,"lon":11.0767,"tst":\#(now - 300)}"#),
            ("ampel/location/van-7", #"{"latitude":48.3705,"longitude":10.8978,"lang":"en"}"#),
            // A long key in the district with the longest name: the row a phone must still fit.
            ("ampel/location/field-team-vehicle-0042", #"{"latitude":49.5797,"longitude":10.6117}"#),
        ] {
            _ = try await MosquittoBroker.runTool("/usr/bin/mosquitto_pub", [
                "-h", broker.host, "-p", "\(broker.port)", "-q", "1", "-t", topic, "-m", payload])
        }
        let status = try await withTimeout(.seconds(180), "the browser check's end") {
            var iterator = exits.makeAsyncIterator()
            return await iterator.next()
        }
        let text = output.value
        #expect(status?.exitCode == 0, "\(text)")
        #expect(text.contains("paths 96"), "\(text)")
        #expect(!text.contains("FAIL"), "\(text)")
        #expect(text.contains(#"device row ["alice/phone", "SK München""#), "\(text)")

        // Without ?lang= the page is in the configured language, not the browser's English.
        let page = Self.reported("default page", in: text) as? [String: String]
        #expect(page?["browser"]?.hasPrefix("en") == true, "\(text)")
        #expect(page?["lang"] == "de" && page?["devices"] == "Geräte", "\(text)")

        // The language column: the daemon's for alice and the vehicle (who asked for none), the
        // configured one for bob/car, the one its message asked for for van-7: what each state carries.
        let languages = text.split(separator: "\n").filter { $0.hasPrefix("device row ") }.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.dropFirst("device row ".count).utf8))) as? [String]
        }.reduce(into: [String: String]()) { $0[$1.first ?? ""] = $1.last }
        #expect(languages == ["alice/phone": "de", "bob/car": "en", "van-7": "en", "field-team-vehicle-0042": "de"], "\(text)")

        let bridge = try #require(Self.reported("bridge text", in: text) as? String, "\(text)")
        #expect(!bridge.contains("[object Object]"), "\(bridge)")
        let webhook = try Regex(#"webhooks\.gotify: delivered \d+ · dropped \(gaveUp \d+ · queueFull \d+\) · failedAttempts \d+ · queued \d+"#)
        #expect(bridge.contains(webhook), "\(bridge)")

        // At 390 px: no table scrolls sideways, and every phase and last-fix cell is in view.
        let tables = try #require(Self.reported("narrow tables", in: text) as? [[String: Any]], "\(text)")
        #expect(Set(tables.compactMap { $0["id"] as? String }) == ["district-table", "device-table", "lamp-table"], "\(tables)")
        for table in tables {
            let scrollWidth = table["scrollWidth"] as? Int ?? .max, clientWidth = table["clientWidth"] as? Int ?? 0
            #expect(scrollWidth <= clientWidth, "\(table)")
            #expect(table["cells"] as? Int == table["shown"] as? Int, "\(table)")
        }
        let byID = Dictionary(tables.map { ($0["id"] as? String ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        #expect(byID["district-table"]?["phase"] as? Int == 96, "\(tables)")
        #expect(byID["device-table"]?["phase"] as? Int == 4 && byID["device-table"]?["fix"] as? Int == 4, "\(tables)")
        for name in ["status-light.png", "status-dark.png", "status-narrow.png"] {
            let size = (try? FileManager.default.attributesOfItem(atPath: shots.appendingPathComponent(name).path)[.size] as? Int) ?? 0
            #expect(size > 10_000, "\(name) is \(size) bytes")
        }
    }
}
