import AmpelTestSupport
import Foundation
import Testing

/// `/` and `/districts/{ags}` of `ampel run` over a real socket: HTML in the asked language,
/// nothing loaded from elsewhere, the district page and its errors.
@Suite("ampel run serves the status page (built binary, real mosquitto)")
struct PageRoutesTests {
    @Test("/ answers HTML in the language asked for (?lang= over Accept-Language), with 96 map paths and a policy that loads nothing from elsewhere; /districts/{ags} shows the rules, 400 and 404 for bad codes")
    func pageAndDistrictPages() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.stop() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withDaemon(["--broker", broker.url, "--state-dir", dir.path, "--source", "snapshot", "--date", "2020-10-15"]) { daemon in
            let base = try await daemon.httpURL()

            let german = try await httpAwait(base + "/", headers: ["Accept-Language": "fr-FR,de;q=0.8,en;q=0.5"], "the page after the first hand-over") { $0.status == 200 }
            #expect(german.headers["content-type"] == "text/html; charset=utf-8")
            #expect(german.headers["content-security-policy"]?.hasPrefix("default-src 'none';") == true)
            #expect(german.text.hasPrefix(#"<!doctype html><html lang="de">"#))
            #expect(german.text.contains(">Landkreise</h2>"))
            #expect(german.text.components(separatedBy: #"<path id="d09"#).count - 1 == 96)
            // The map's fill is what the district's state topic says.
            #expect(german.text.contains(#"data-ags="09162" data-name="SK München" data-phase="red""#))

            let english = try await httpGet(base + "/?lang=en", headers: ["Accept-Language": "de-DE"])
            #expect(english.text.hasPrefix(#"<!doctype html><html lang="en">"#))
            #expect(english.text.contains(">Districts</h2>"))

            let district = try await httpGet(base + "/districts/09162?lang=en")
            #expect(district.status == 200)
            #expect(district.text.contains("Rules in force"))
            #expect(district.text.contains(#"<svg class="chart""#))
            #expect(try await httpGet(base + "/districts/9162").status == 400)
            #expect(try await httpGet(base + "/districts/01001").status == 404)
        }
    }
}
