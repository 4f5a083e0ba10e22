import AmpelCore
import AmpelData
import AmpelDomain
@testable import AmpelPage
import Foundation
import Testing

/// The header's data badge and the lines under it (issue 30.3): the kind of data and its day
/// instead of "current"/"live", and a plain line when the live source fails.
@Suite("The data badge and the lines about the data, in German and English")
struct DataBadgeTests {
    static let refused = "cannot reach 127.0.0.1:9: connection refused"
    static let notFound = "raw.githubusercontent.com answered HTTP 404 Not Found"
    static let held = "40 of 96 districts changed by more than a factor of 3 from 2026-08-19 to 2026-08-20 (…): held as a possibly wrong release until the next check still shows it"

    static func standIn(error: String? = refused) -> PageDataStatus {
        PageDataStatus(dataDate: "2020-11-23", source: "snapshot:2020-11-23", stale: true, kind: .standIn, lastError: error)
    }

    static func snapshot(_ day: String = "2020-11-05") -> PageDataStatus {
        PageDataStatus(dataDate: day, source: "snapshot:\(day)", stale: false, kind: .snapshot)
    }

    @Test("the badge names the kind and the day in the page's language; green only for live data that is not stale")
    func badges() {
        let en = PageText(.en), de = PageText(.de)
        let cases: [(PageDataStatus, String, String, DataBadge.Tone)] = [
            (PageDataStatus(dataDate: "2026-08-21", source: "rki", stale: false, kind: .live), "Live · 2026-08-21", "Live · 21.08.2026", .ok),
            (PageDataStatus(dataDate: "2026-08-18", source: "rki", stale: true, kind: .live),
             "Live · 2026-08-18 (stale)", "Live · 18.08.2026 (veraltet)", .warn),
            (Self.standIn(), "Stand-in · 2020-11-23", "Ersatzdaten · 23.11.2020", .warn),
            (Self.snapshot(), "Snapshot · 2020-11-05", "Momentaufnahme · 05.11.2020", .fixed),
            (PageDataStatus(dataDate: "2021-03-01", source: "history", stale: false, kind: .history), "History · 2021-03-01", "Verlauf · 01.03.2021", .fixed),
            (PageDataStatus(dataDate: "2021-03-01", source: "replay", stale: false, kind: .replay), "Replay · 2021-03-01", "Wiederholung · 01.03.2021", .fixed),
            (PageDataStatus(dataDate: nil, source: "", stale: true, kind: .standIn), "Stand-in · –", "Ersatzdaten · –", .warn),
        ]
        for (data, english, german, tone) in cases {
            #expect(en.badge(data).text == english)
            #expect(de.badge(data).text == german)
            #expect(en.badge(data).tone == tone && de.badge(data).tone == tone, "\(data)")
        }
        #expect(en.badge(Self.standIn()).title == "Bundled data, standing in until the live source answers")
        #expect(de.badge(Self.snapshot()).title == "Eine mitgelieferte Momentaufnahme, wie eingestellt: Sie ändert sich nicht")
    }

    @Test("a live source that cannot be reached: RKI unreachable, the reason, and what the map shows instead")
    func unreachable() {
        #expect(PageText(.en).notices(Self.standIn()) == [DataNotice(
            id: "data-error", text: "RKI unreachable: cannot reach 127.0.0.1:9: connection refused; the map shows bundled data of 2020-11-23")])
        #expect(PageText(.de).notices(Self.standIn()) == [DataNotice(
            id: "data-error", text: "RKI nicht erreichbar: cannot reach 127.0.0.1:9: connection refused; die Karte zeigt mitgelieferte Daten vom 23.11.2020")])
        // Live data from an earlier fetch (the cache), its source now failing; ArcGIS by its name.
        let cached = PageDataStatus(dataDate: "2026-08-20", source: "arcgis", stale: true, kind: .live,
                                    lastError: "no complete answer from services7.arcgis.com within 30 s")
        #expect(PageText(.en).notices(cached).map(\.text) == [
            "RKI (ArcGIS) unreachable: no complete answer from services7.arcgis.com within 30 s; the map shows the last fetched data of 2026-08-20"])
        #expect(PageText(.de).notices(cached).map(\.text) == [
            "RKI (ArcGIS) nicht erreichbar: no complete answer from services7.arcgis.com within 30 s; die Karte zeigt die zuletzt abgerufenen Daten vom 20.08.2026"])
    }

    @Test("an answer that was no use is not called unreachable")
    func unusableAnswer() {
        let data = PageDataStatus(dataDate: "2026-08-20", source: "rki", stale: true, kind: .live, lastError: Self.notFound)
        #expect(PageText(.en).notices(data).map(\.text) == [
            "RKI gave no usable data: raw.githubusercontent.com answered HTTP 404 Not Found; the map shows the last fetched data of 2026-08-20"])
        #expect(PageText(.de).notices(data).map(\.text) == [
            "RKI lieferte keine brauchbaren Daten: raw.githubusercontent.com answered HTTP 404 Not Found; die Karte zeigt die zuletzt abgerufenen Daten vom 20.08.2026"])
    }

    @Test("stale without an error: a stand-in waits for the first answer, live data is older than allowed")
    func staleLines() {
        let waiting = Self.standIn(error: nil)
        #expect(PageText(.en).notices(waiting) == [DataNotice(id: "data-stale", text: "Waiting for the first answer of RKI: the map shows bundled data of 2020-11-23")])
        #expect(PageText(.de).notices(waiting).map(\.text) == ["Warten auf die erste Antwort von RKI: Die Karte zeigt mitgelieferte Daten vom 23.11.2020"])
        let old = PageDataStatus(dataDate: "2026-08-18", source: "rki", stale: true, kind: .live)
        #expect(PageText(.en).notices(old) == [DataNotice(
            id: "data-stale", text: "The data of 2026-08-18 is older than allowed (data.max_age): the situation may have changed since")])
        #expect(PageText(.de).notices(old).map(\.text) == [
            "Die Daten vom 18.08.2026 sind älter als erlaubt (data.max_age): Die Lage kann sich seither geändert haben"])
    }

    @Test("a held publication has a line of its own, after the error's")
    func heldLine() {
        var data = PageDataStatus(dataDate: "2026-08-19", source: "rki", stale: false, kind: .live, held: Self.held)
        #expect(PageText(.en).notices(data) == [DataNotice(
            id: "data-held", text: "A new publication of RKI is held back: \(Self.held); the map shows the last fetched data of 2026-08-19")])
        #expect(PageText(.de).notices(data).map(\.text) == [
            "Eine neue Veröffentlichung von RKI wird zurückgehalten: \(Self.held); die Karte zeigt die zuletzt abgerufenen Daten vom 19.08.2026"])
        data.lastError = Self.refused
        #expect(PageText(.en).notices(data).map(\.id) == ["data-error", "data-held"])
    }

    @Test("data as it should be says nothing; no kind is ever called current")
    func nothingToSay() {
        for language in Language.allCases {
            let text = PageText(language)
            #expect(text.notices(Self.snapshot()).isEmpty)
            #expect(text.notices(PageDataStatus(dataDate: "2026-08-21", source: "rki", stale: false, kind: .live)).isEmpty)
            for kind in PageDataKind.allCases {
                for stale in [false, true] {
                    let data = PageDataStatus(dataDate: "2020-11-05", source: "x", stale: stale, kind: kind, lastError: stale ? Self.refused : nil)
                    let words = [text.badge(data).text, text.badge(data).title] + text.notices(data).map(\.text)
                    for word in words {
                        #expect(!word.lowercased().contains("current") && !word.lowercased().contains("aktuell"), "\(word)")
                    }
                }
            }
        }
    }

    @Test("the kind of a status that names none comes from its source; a template is filled in one pass")
    func kindFromSourceAndFill() {
        #expect(PageDataStatus(dataDate: nil, source: "rki", stale: false).kind == .live)
        #expect(PageDataStatus(dataDate: nil, source: "arcgis", stale: false).kind == .live)
        #expect(PageDataStatus(dataDate: nil, source: "snapshot:2020-10-15", stale: false).kind == .snapshot)
        #expect(PageDataStatus(dataDate: nil, source: "bundled:latest", stale: false).kind == .snapshot)
        #expect(PageDataStatus(dataDate: nil, source: "history", stale: false).kind == .history)
        #expect(PageDataStatus(dataDate: nil, source: "replay", stale: false).kind == .replay)
        // An error text with a placeholder in it is not filled again.
        #expect(PageText.fill("{source}: {error} ({day})", ["source": "RKI", "error": "odd {day}", "day": "2020-11-23"])
            == "RKI: odd {day} (2020-11-23)")
        #expect(PageText.fill("{unknown} {", ["day": "x"]) == "{unknown} {")
    }

    /// The status page's header on `data`.
    static func header(_ data: PageDataStatus, _ language: Language = .en) throws -> String {
        let page = StatusPage.render(StatusPageModel(language: language, ruleSet: RuleSetCatalog.standard(), data: data, districts: [:]),
                                     shapes: try MapShapes.bundled())
        let start = try #require(page.range(of: "<header"))
        let end = try #require(page.range(of: "<main"))
        return String(page[start.lowerBound..<end.lowerBound])
    }

    @Test("the first render: badge and lines in the header, the reason escaped, no current and no live")
    func rendered() throws {
        let snapshot = try Self.header(Self.snapshot())
        #expect(snapshot.contains(#"<span id="data-badge" class="pill data fixed" title="A bundled snapshot, as configured: it does not change">Snapshot · 2020-11-05</span>"#))
        #expect(snapshot.contains(#"<div id="data-notice" class="banner" role="alert" hidden></div>"#))
        #expect(!snapshot.contains("current") && !snapshot.contains(">live<"), "\(snapshot)")
        #expect(snapshot.contains(#"<span id="connection" class="pill conn">connected</span>"#))

        let failing = try Self.header(Self.standIn(), .de)
        #expect(failing.contains(#"class="pill data warn""#) && failing.contains(">Ersatzdaten · 23.11.2020</span>"))
        #expect(failing.contains(#"<div id="data-notice" class="banner" role="alert"><p id="data-error">RKI nicht erreichbar: cannot reach 127.0.0.1:9: connection refused; die Karte zeigt mitgelieferte Daten vom 23.11.2020</p></div>"#))

        let evil = try Self.header(Self.standIn(error: "cannot reach <img src=x onerror=alert(1)>"))
        #expect(!evil.contains("<img") && evil.contains("&lt;img"))

        // The district page has the same header, without the connection pill (it has no script).
        let district = DistrictPage.render(DistrictPageModel(
            language: .en, ruleSet: RuleSetCatalog.standard(), data: Self.standIn(),
            district: DistrictStatus(ags: "09162", name: "SK München", incidence: nil, phase: .noData, color: nil), history: []))
        #expect(district.contains(">Stand-in · 2020-11-23</span>") && district.contains(#"<p id="data-error">RKI unreachable: "#))
        #expect(!district.contains(#"id="connection""#))
    }

    @Test("the map's tooltips name the data as the badge does")
    func mapTooltip() throws {
        let svg = MapSVG.render(shapes: try MapShapes.bundled(), districts: [:], data: Self.standIn(), text: PageText(.en))
        #expect(svg.contains("Data date: Stand-in · 2020-11-23</title>"))
    }

    /// Every kind, stale or not, with each sort of reason, a held publication, sources with
    /// and without a name, no day: what the script polls may be any of these.
    static var matrix: [PageDataStatus] {
        var out: [PageDataStatus] = []
        for kind in PageDataKind.allCases {
            for stale in [false, true] {
                for error in [nil, refused, notFound, "odd {day} text", ""] as [String?] {
                    for source in ["rki", "arcgis", "snapshot:2020-11-23", "history", ""] {
                        out.append(PageDataStatus(dataDate: "2020-11-23", source: source, stale: stale, kind: kind, lastError: error,
                                                  held: error == refused ? held : nil))
                    }
                }
            }
        }
        out.append(PageDataStatus(dataDate: nil, source: "rki", stale: true, kind: .live, lastError: refused))
        out.append(PageDataStatus(dataDate: "not a day", source: "rki", stale: false, kind: .live))
        return out
    }

    @Test("the script builds the same badge and lines as the server, in both languages (headless Chromium)")
    func scriptAgreesWithServer() throws {
        let matrix = Self.matrix
        var infos = JSONWriter(capacity: 64 * 1024)
        infos.raw("[")
        for (index, data) in matrix.enumerated() {
            if index > 0 { infos.raw(",") }
            StatusPage.dataJSON(data, to: &infos)
        }
        infos.raw("]")
        for language in Language.allCases {
            let text = PageText(language)
            var words = JSONWriter(capacity: 4096)
            text.dataStrings(&words)
            let expression = "(function(){const D=\(StatusPage.scriptSafe(words.bytes));"
                + "return \(StatusPage.scriptSafe(infos.bytes)).map(i=>({badge:dataBadge(i,D),notices:dataNotices(i,D)}));})()"
            let results = try #require(try PageScriptValueTests.evaluate(expression, prelude: PageScript.values + PageScript.dataStatus) as? [[String: Any]])
            try #require(results.count == matrix.count)
            for (data, result) in zip(matrix, results) {
                let badge = text.badge(data)
                let script = result["badge"] as? [String: String]
                #expect(script == ["text": badge.text, "tone": badge.tone.rawValue, "title": badge.title], "\(language) \(data)")
                let notices = (result["notices"] as? [[String: String]])?.map { DataNotice(id: $0["id"] ?? "", text: $0["text"] ?? "") }
                #expect(notices == text.notices(data), "\(language) \(data)")
            }
        }
        #expect(PageScript.js.contains(PageScript.dataStatus))
    }
}
