import AmpelCore
import AmpelData
import AmpelDomain
import AmpelPage
import Foundation
import Testing

@Suite("The HTML of / and /districts/{ags}: languages, escaping, nothing from outside")
struct PageTextTests {
    private func statusPage(_ language: Language, stale: Bool = false, districts: [String: DistrictStatus]? = nil) throws -> String {
        let ruleSet = RuleSetCatalog.standard()
        let dataset = try BundledData.shared.snapshot(on: Day(iso: "2020-10-15"))
        let model = StatusPageModel(language: language, ruleSet: ruleSet, data: PageDataStatus(dataDate: "2020-10-15", source: "snapshot:2020-10-15", stale: stale),
                                    districts: try districts ?? statuses(dataset, ruleSet: ruleSet))
        return StatusPage.render(model, shapes: try MapShapes.bundled())
    }

    @Test("?lang= wins over Accept-Language; q values order the header; unknown falls back to English")
    func languageChoice() {
        #expect(PageLanguage.choose(query: "de", acceptLanguage: "en-GB,en;q=0.9") == .de)
        #expect(PageLanguage.choose(query: "en", acceptLanguage: "de-DE,de;q=0.9") == .en)
        #expect(PageLanguage.choose(query: "fr", acceptLanguage: "de-DE,de;q=0.9") == .de)
        #expect(PageLanguage.choose(query: nil, acceptLanguage: "fr-FR,fr;q=0.9,de;q=0.8,en;q=0.7") == .de)
        #expect(PageLanguage.choose(query: nil, acceptLanguage: "en;q=0.5,de;q=0.6") == .de)
        #expect(PageLanguage.choose(query: nil, acceptLanguage: "de;q=0,en") == .en)
        #expect(PageLanguage.choose(query: nil, acceptLanguage: "fr") == .en)
        #expect(PageLanguage.choose(query: nil, acceptLanguage: nil) == .en)
    }

    @Test("German and English pages carry their own words, the rule set's titles and numbers")
    func germanAndEnglish() throws {
        let de = try statusPage(.de), en = try statusPage(.en)
        let ruleSet = RuleSetCatalog.standard()
        #expect(de.hasPrefix(#"<!doctype html><html lang="de">"#))
        #expect(en.hasPrefix(#"<!doctype html><html lang="en">"#))
        #expect(de.contains(">Landkreise</h2>") && de.contains(">Geräte</h2>") && de.contains(">Lampen</h2>"))
        #expect(en.contains(">Districts</h2>") && en.contains(">Devices</h2>") && en.contains(">Lamps</h2>"))
        for phase in ruleSet.phases {
            #expect(de.contains(htmlEscaped(phase.title(.de))))
            #expect(en.contains(htmlEscaped(phase.title(.en))))
        }
        #expect(PageText(.de).incidence(1234.56) == "1.234,6")
        #expect(PageText(.en).incidence(1234.56) == "1,234.6")
        #expect(PageText(.en).incidence(nil) == "–")
        #expect(de.contains(#""lang":"de""#))
        #expect(!de.contains(">Districts</h2>"))
    }

    @Test("the page loads nothing from another host: no src, no external href, no @import, no url()")
    func selfContained() throws {
        let page = try statusPage(.en)
        #expect(!page.contains("src="))
        #expect(!page.contains("http://") || page.components(separatedBy: "http://").dropFirst().allSatisfy { $0.hasPrefix("www.w3.org/2000/svg") })
        #expect(!page.contains("https://"))
        #expect(!page.contains("@import"))
        #expect(!page.contains("url(http"))
        #expect(page.utf8.count < 400_000, "page is \(page.utf8.count) bytes")
    }

    @Test("every district has a list row that links to its page")
    func districtRows() throws {
        let page = try statusPage(.de)
        #expect(occurrences(of: #"<tr data-ags=""#, in: page) == 96)
        #expect(page.contains(#"<a href="/districts/09162?lang=de">SK München</a>"#))
    }

    @Test("a snapshot is badged as one, never stale, and needs no line under the header")
    func snapshotBadge() throws {
        let page = try statusPage(.en), german = try statusPage(.de)
        #expect(page.contains(#">Snapshot · 2020-10-15</span>"#) && page.contains(#"class="pill data fixed""#))
        #expect(german.contains(#">Momentaufnahme · 15.10.2020</span>"#))
        #expect(page.contains(#"<div id="data-notice" class="banner" role="alert" hidden></div>"#))
    }

    @Test("names from the data cannot inject markup, not even into the script's configuration")
    func escaping() throws {
        let evil = "</script><img src=x onerror=alert(1)>"
        let page = try statusPage(.en, districts: ["09162": DistrictStatus(ags: "09162", name: evil, incidence: 1, phase: .phase(.green), color: RGB(hex: "#00A651"))])
        #expect(!page.contains("<img"))
        #expect(occurrences(of: "</script>", in: page) == 2)
    }

    @Test("the district page shows the rules in force in the page language and the chart")
    func districtPage() throws {
        let ruleSet = RuleSetCatalog.standard()
        let red = try #require(ruleSet.rules(for: .red))
        for language in Language.allCases {
            let page = DistrictPage.render(DistrictPageModel(
                language: language, ruleSet: ruleSet, data: PageDataStatus(dataDate: "2020-10-15", source: "snapshot", stale: false),
                district: DistrictStatus(ags: "09162", name: "SK München", incidence: 61.2, phase: .phase(.red), color: red.color),
                history: BundledData.shared.dailyHistory.series(ags: "09162")))
            for rule in red.rules(language) { #expect(page.contains("<li>" + htmlEscaped(rule) + "</li>")) }
            for rule in ruleSet.always(language) { #expect(page.contains("<li>" + htmlEscaped(rule) + "</li>")) }
            #expect(page.contains(#"<svg class="chart""#))
            #expect(page.contains(language == .de ? "Geltende Regeln" : "Rules in force"))
        }
    }
}
