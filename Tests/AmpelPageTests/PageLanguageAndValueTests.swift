import AmpelCore
import AmpelDomain
@testable import AmpelPage
import Foundation
import Testing

@Suite("The page's language: the choice on the page, then the configured lang, then the browser")
struct PageLanguageDefaultTests {
    @Test("a configured lang wins over Accept-Language; ?lang= wins over both; without either, the browser decides")
    func configuredLanguage() {
        #expect(PageLanguage.choose(query: nil, configured: .de, acceptLanguage: "en-GB,en;q=0.9") == .de)
        #expect(PageLanguage.choose(query: nil, configured: .en, acceptLanguage: "de-DE,de;q=0.9") == .en)
        #expect(PageLanguage.choose(query: nil, configured: .de, acceptLanguage: nil) == .de)
        #expect(PageLanguage.choose(query: "en", configured: .de, acceptLanguage: "de-DE") == .en)
        // A ?lang= Ampel does not speak is no choice: the configured language stands.
        #expect(PageLanguage.choose(query: "fr", configured: .de, acceptLanguage: "en-GB") == .de)
        #expect(PageLanguage.choose(query: nil, configured: nil, acceptLanguage: "de-DE,de;q=0.9") == .de)
        #expect(PageLanguage.choose(query: nil, configured: nil, acceptLanguage: nil) == .en)
    }
}

/// The script's value rendering, run in headless Chromium (the browser `scripts/install-deps.sh`
/// installs for the page's browser test) on its own, without a daemon.
@Suite("The page script writes objects from the API as their fields")
struct PageScriptValueTests {
    /// Runs `prelude` (the script's value rendering unless told) and then `expression` in a
    /// page; returns its JSON value.
    static func evaluate(_ expression: String, prelude: String = PageScript.values) throws -> Any {
        let chromium = "/usr/bin/chromium"
        try #require(FileManager.default.isExecutableFile(atPath: chromium), "chromium is missing: run scripts/install-deps.sh")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-page-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let page = dir.appendingPathComponent("values.html"), dump = dir.appendingPathComponent("dom.html")
        // Percent-encoded, so the dumped DOM holds the JSON without any HTML escaping.
        let html = "<!doctype html><html><body><script>\(prelude)\ndocument.body.textContent=encodeURIComponent(JSON.stringify(\(expression)));</script></body></html>"
        try html.write(to: page, atomically: true, encoding: .utf8)
        FileManager.default.createFile(atPath: dump.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromium)
        process.arguments = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--user-data-dir=" + dir.appendingPathComponent("profile").path, "--dump-dom", page.absoluteString]
        process.standardOutput = try FileHandle(forWritingTo: dump)
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let dom = try String(contentsOf: dump, encoding: .utf8)
        let body = try #require(dom.firstMatch(of: try Regex(#"<body>([^<]*)</body>"#))?.output[1].substring, "\(dom)")
        let json = try #require(String(body).trimmingCharacters(in: .whitespacesAndNewlines).removingPercentEncoding)
        return try JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed])
    }

    @Test("nested objects read as their fields, lists as their items, null as a dash; counters as chips")
    func objectsAsText() throws {
        let gotify = #"{delivered:1,dropped:{gaveUp:0,queueFull:2},failedAttempts:3,queued:0}"#
        let shown = try #require(try Self.evaluate(
            #"[show(\#(gotify)),show(null),show(undefined),show([1,"a",{b:2}]),show({}),show([]),show(true),show(12),show("text")]"#) as? [String])
        #expect(shown == ["delivered 1 · dropped (gaveUp 0 · queueFull 2) · failedAttempts 3 · queued 0", "–", "–", "1, a, b 2", "–", "–",
                          "true", "12", "text"])
        let counters = try #require(try Self.evaluate(
            #"counterTexts({alerts:2,accepted:{owntracks:3,plain:1},webhooks:{gotify:\#(gotify),ntfy:{delivered:0}},stateRecovered:null})"#) as? [String])
        #expect(counters == ["accepted.owntracks 3", "accepted.plain 1", "alerts 2", "stateRecovered –",
                             "webhooks.gotify: delivered 1 · dropped (gaveUp 0 · queueFull 2) · failedAttempts 3 · queued 0",
                             "webhooks.ntfy: delivered 0"])
        #expect(!counters.joined().contains("[object Object]"))
        #expect(try Self.evaluate("counterTexts(null)") as? [String] == [])
        // The page's script is built around the same functions.
        #expect(PageScript.js.contains(PageScript.values))
    }
}
