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
            fills[entry.district.ags] = try ruleSet.measure(entry, on: dataset.date).phase.color.hex
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
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.appendingPathComponent("state").path,
                              "--source", "snapshot", "--date", "2020-10-15", "--lang", "de"],
                             configuration: extra + DaemonProcess.replayConfiguration) { daemon in
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
            // axe-core ran in both modes at both widths (a serious or critical violation is a FAIL above).
            for run in ["axe light 1280", "axe light 390", "axe dark 1280", "axe dark 390"] {
                #expect(text.contains(run), "\(run) missing: \(text)")
            }
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
}

/// The header's data badge and the lines under it (issue 30.3) in headless Chromium, against
/// `ampel run` and a real mosquitto: the browser starts first, the daemon after it, and the
/// page's address is handed over once the daemon serves it, so "within 10 s" counts from the
/// daemon's start. What is read (the header's badges, the visible lines under it, the bridge
/// card) the page had before as well, so each assertion can be run against the older page.
@Suite("The data badge and the line about a failing source in headless Chromium (built binary, real mosquitto)", .serialized)
struct PageDataBadgeBrowserTests {
    struct Report {
        let text: String
        let status: ChildProcess.Status?
        /// Seconds since 1970 when the daemon was started.
        let started: Double

        /// When the page first showed every `--expect` text (seconds since 1970).
        var seen: Double? { PageBrowserTests.reported("data seen", in: text) as? Double }
        var never: [String: Bool]? { PageBrowserTests.reported("data never", in: text) as? [String: Bool] }
        /// `header`, `meta` (the header's badges and links), `notices`, `bridge`, `badgeClass`.
        var texts: [String: Any] { PageBrowserTests.reported("data texts", in: text) as? [String: Any] ?? [:] }
        /// The same for the page in the other language.
        var other: [String: Any] { PageBrowserTests.reported("data other", in: text) as? [String: Any] ?? [:] }
    }

    /// Runs the browser's data check (`--data-check`) on the page of a daemon started with
    /// `arguments`: until the English page shows every `expect` text, whether it ever shows a
    /// `never` word, then the German page.
    static func check(_ arguments: [String], expect: [String], never: [String] = []) async throws -> Report {
        try #require(FileManager.default.fileExists(atPath: PageBrowserTests.venv + "/.complete"),
                     "Selenium's venv is missing at \(PageBrowserTests.venv): run scripts/install-deps.sh")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"), "chromium-driver is missing: run scripts/install-deps.sh")
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let urlFile = dir.appendingPathComponent("url")

        let output = Watched("")
        let (exits, continuation) = AsyncStream.makeStream(of: ChildProcess.Status.self)
        let browser = try ChildProcess(
            PageBrowserTests.venv + "/bin/python",
            [PageBrowserTests.script, "--data-check", "--url-file", urlFile.path, "--path", "/?lang=en", "--other-path", "/?lang=de"]
                + expect.flatMap { ["--expect", $0] } + never.flatMap { ["--never", $0] },
            inputPipe: true, output: .read { data in output.update { $0 += String(decoding: data, as: UTF8.self) } }, errors: .sameAsOutput,
            onExit: { status in
                continuation.yield(status)
                continuation.finish()
            })
        defer { browser.signal(SIGKILL) }
        try await withTimeout(.seconds(120), "the browser's start") {
            await output.wait { $0.contains("BROWSER") || $0.contains("Traceback") }
        }
        try #require(output.value.contains("BROWSER"), "\(output.value)")

        return try await withDaemon(["--broker", broker.url, "--state-dir", dir.appendingPathComponent("state").path] + arguments) { daemon in
            let base = try await daemon.httpURL()
            // From the moment it listens: before that a debug build beside CI's parallel suites
            // spends seconds loading its geometry (a user's clock starts with what they can ask).
            let started = Date().timeIntervalSince1970
            // `/` answers 503 until the first hand-over; the browser gets the address once it is the page.
            _ = try await httpAwait(base + "/", "the page") { $0.status == 200 }
            try base.write(to: urlFile, atomically: true, encoding: .utf8)
            browser.closeInput()
            let status = try await withTimeout(.seconds(180), "the browser check's end") {
                var iterator = exits.makeAsyncIterator()
                return await iterator.next()
            }
            _ = try await daemon.stop()
            return Report(text: output.value, status: status, started: started)
        }
    }

    @Test("an unreachable RKI: a stand-in badge with the bundled day and the refused reason on the page within 10 s, in both languages")
    func unreachableSource() async throws {
        // Nothing listens there: every attempt is refused at once.
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        let port = refusing.port
        let report = try await Self.check(["--source", "rki", "--url", "http://127.0.0.1:\(port)/x.csv"],
                                          expect: ["Stand-in", "2020-11-23", "RKI unreachable", "refused"])
        let text = report.text
        #expect(report.status?.exitCode == 0, "\(text)")
        let took = report.seen.map { $0 - report.started }
        #expect(took.map { $0 < 10 } == true, "the page showed it \(took.map { "\($0) s" } ?? "never") after the daemon began to listen: \(text)")

        let meta = report.texts["meta"] as? String ?? ""
        #expect(meta.contains("Stand-in · 2020-11-23"), "\(text)")
        #expect(!meta.lowercased().contains("live") && !meta.lowercased().contains("current"), "\(meta)")
        #expect(report.texts["badgeClass"] as? String == "pill data warn", "\(text)")
        let notices = report.texts["notices"] as? [String] ?? []
        #expect(notices == ["RKI unreachable: cannot reach 127.0.0.1:\(port): connection refused; the map shows bundled data of 2020-11-23"], "\(text)")
        let bridge = report.texts["bridge"] as? String ?? ""
        #expect(bridge.contains("Data kind Stand-in") && !bridge.contains("current"), "\(bridge)")

        let german = report.other
        #expect((german["meta"] as? String)?.contains("Ersatzdaten · 23.11.2020") == true, "\(text)")
        #expect((german["notices"] as? [String])?.first?.hasPrefix("RKI nicht erreichbar: cannot reach 127.0.0.1:\(port)") == true, "\(text)")
        #expect((german["notices"] as? [String])?.first?.hasSuffix("; die Karte zeigt mitgelieferte Daten vom 23.11.2020") == true, "\(text)")
    }

    @Test("a snapshot of 2020-11-05: badged as a snapshot of its day, never current, no line under the header")
    func snapshot() async throws {
        let report = try await Self.check(["--source", "snapshot", "--date", "2020-11-05"], expect: ["Snapshot", "2020-11-05"],
                                          never: ["current", "aktuell"])
        let text = report.text
        #expect(report.status?.exitCode == 0, "\(text)")
        #expect(report.seen != nil, "\(text)")
        #expect(report.never == ["current": false, "aktuell": false], "the page said current: \(text)")
        let meta = report.texts["meta"] as? String ?? ""
        #expect(meta.contains("Snapshot · 2020-11-05") && !meta.lowercased().contains("live"), "\(meta)")
        #expect(report.texts["badgeClass"] as? String == "pill data fixed", "\(text)")
        #expect((report.texts["notices"] as? [String])?.isEmpty == true, "\(text)")
        let bridge = report.texts["bridge"] as? String ?? ""
        #expect(bridge.contains("Data kind Snapshot") && !bridge.contains("State"), "\(bridge)")

        let german = report.other
        let germanMeta = german["meta"] as? String ?? ""
        #expect(germanMeta.contains("Momentaufnahme · 05.11.2020") && !germanMeta.lowercased().contains("aktuell"), "\(text)")
        #expect((german["bridge"] as? String)?.contains("Datenart Momentaufnahme") == true, "\(text)")
    }
}
