import AmpelCore
import AmpelDomain
import Foundation

/// `/`: the status page's HTML, with the map and the district list rendered on the server
/// and the live parts (devices, lamps, bridge) filled by the embedded script.
public enum StatusPage {
    /// How often the script polls, in milliseconds.
    public static let pollMilliseconds = 1500
    /// Devices per page of the device table.
    public static let devicePageSize = 25

    public static func render(_ model: StatusPageModel, shapes: MapShapes) -> String {
        let text = PageText(model.language, region: model.ruleSet.region)
        let lang = model.language.rawValue
        var html = head(title: text.title, language: model.language)
        html += header(text: text, data: model.data)
        html += #"<main class="layout">"#

        html += #"<section class="card map-card" aria-labelledby="h-map"><h2 id="h-map">\#(htmlEscaped(text.map))</h2>"#
        html += MapSVG.render(shapes: shapes, districts: model.districts, data: model.data, text: text)
        html += legend(model.ruleSet, text: text)
        html += #"<div id="tooltip" class="tooltip" hidden></div></section>"#

        html += districtsCard(model, shapes: shapes, text: text, lang: lang)

        html += StatesCard.render(model.states, ruleSet: model.ruleSet, text: text)

        html += #"<section class="card wide" aria-labelledby="h-devices"><div class="card-head"><h2 id="h-devices">\#(htmlEscaped(text.devices))</h2>"#
        html += #"<input id="device-search" type="search" placeholder="\#(htmlEscaped(text.searchDevices))" aria-label="\#(htmlEscaped(text.searchDevices))"></div>"#
        html += #"<div class="scroll"><table id="device-table"><thead><tr><th>\#(htmlEscaped(text.key))</th><th>\#(htmlEscaped(text.district))</th><th class="phase">\#(htmlEscaped(text.phase))</th><th class="num fix">\#(htmlEscaped(text.lastFix))</th><th class="hide-narrow">\#(htmlEscaped(text.lang))</th></tr></thead>"#
        html += #"<tbody><tr><td colspan="5" class="empty">…</td></tr></tbody></table></div>"#
        html += #"<div class="pager"><span id="device-range"></span><button id="device-prev" type="button" disabled>\#(htmlEscaped(text.previous))</button><button id="device-next" type="button" disabled>\#(htmlEscaped(text.next))</button></div></section>"#

        html += #"<section class="card" aria-labelledby="h-lamps"><h2 id="h-lamps">\#(htmlEscaped(text.lamps))</h2><div class="scroll"><table id="lamp-table"><thead><tr><th>\#(htmlEscaped(text.name))</th><th class="hide-phone">\#(htmlEscaped(text.driver))</th><th>\#(htmlEscaped(text.follows))</th><th>\#(htmlEscaped(text.status))</th><th>\#(htmlEscaped(text.lastColour))</th></tr></thead>"#
        html += #"<tbody><tr><td colspan="5" class="empty">\#(htmlEscaped(text.noLamps))</td></tr></tbody></table></div></section>"#

        html += #"<section class="card" aria-labelledby="h-bridge"><h2 id="h-bridge">\#(htmlEscaped(text.bridge))</h2><dl id="bridge-facts" class="facts"></dl>"#
        html += #"<h3>\#(htmlEscaped(text.errors))</h3><ol id="bridge-errors" class="errors"></ol></section>"#
        html += "</main>"
        html += footer(text: text, ruleSet: model.ruleSet)

        let config = pageConfig(model, text: text)
        html += #"<script id="page-config" type="application/json">\#(scriptSafe(config))</script>"#
        html += "<script>" + PageScript.js + "</script></body></html>"
        return html
    }

    /// The districts' card: a filter and a sortable table, every district of the map.
    static func districtsCard(_ model: StatusPageModel, shapes: MapShapes, text: PageText, lang: String) -> String {
        var html = ""
        html += #"<section class="card list-card" aria-labelledby="h-districts"><div class="card-head"><h2 id="h-districts">\#(htmlEscaped(text.districts))</h2>"#
        html += #"<input id="district-filter" type="search" placeholder="\#(htmlEscaped(text.filterDistricts))" aria-label="\#(htmlEscaped(text.filterDistricts))"></div>"#
        html += #"<div class="scroll"><table id="district-table"><thead><tr><th data-sort="name" aria-sort="ascending">\#(htmlEscaped(text.name))</th><th data-sort="incidence" class="num">\#(htmlEscaped(text.incidence))</th><th data-sort="phase" class="phase">\#(htmlEscaped(text.phase))</th></tr></thead><tbody>"#
        let rows = shapes.shapes.map { shape in
            model.districts[shape.ags] ?? DistrictStatus(ags: shape.ags, name: shape.name, incidence: nil, phase: .noData, color: nil)
        }.sorted {
            // "LK München" and "SK München" sort together, under M, as the script sorts them.
            let order = bareName($0.name).localizedStandardCompare(bareName($1.name))
            return order == .orderedSame ? $0.name < $1.name : order == .orderedAscending
        }
        for district in rows {
            html += districtRow(district, text: text, lang: lang)
        }
        html += "</tbody></table></div></section>"
        return html
    }

    /// The script's configuration: the language, the data as rendered, colours, the API routes
    /// and the texts the script shows.
    static func pageConfig(_ model: StatusPageModel, text: PageText) -> [UInt8] {
        let lang = model.language.rawValue
        var json = JSONWriter(capacity: 2048)
        json.raw(#"{"lang":"#)
        json.string(lang)
        // The data in force as the server rendered it, in `bridge/info`'s words: the map's
        // tooltip says it until the first poll brings the bridge's own.
        json.raw(#","data":"#)
        dataJSON(model.data, to: &json)
        json.raw(#","dataText":"#)
        text.dataStrings(&json)
        json.raw(#","noDataFill":"#)
        json.string(MapSVG.noDataFill)
        json.raw(#","phaseColors":{"#)
        for phase in model.ruleSet.phases {
            json.string(phase.id.id)
            json.raw(":")
            json.string(phase.color.hex)
            json.raw(",")
        }
        json.raw(#""outside":"#)
        json.string(model.ruleSet.outside.color.hex)
        json.raw(#","none":"#)
        json.string(MapSVG.noDataFill)
        json.raw(#"},"pollMs":"#)
        json.number(pollMilliseconds)
        json.raw(#","pageSize":"#)
        json.number(devicePageSize)
        // The JSON routes the script polls (docs/http.md); the lamps come inside `/api/bridge`.
        json.raw(#","api":{"districts":"/api/districts","devices":"/api/devices","bridge":"/api/bridge","lamps":null},"text":{"source":"#)
        json.string(text.source)
        json.raw(#","age":"#)
        json.string(text.age)
        json.raw(#","lastRefresh":"#)
        json.string(text.lastRefresh)
        json.raw(#","lastError":"#)
        json.string(text.lastError)
        json.raw(#","journal":"#)
        json.string(text.journal)
        json.raw(#","lastCheck":"#)
        json.string(text.lastCheck)
        json.raw(#","held":"#)
        json.string(text.held)
        json.raw(#","stateRecovered":"#)
        json.string(text.stateRecovered)
        json.raw(#","devices":"#)
        json.string(text.devices)
        json.raw(#","device":"#)
        json.string(text.device)
        json.raw(#","district":"#)
        json.string(text.district)
        json.raw(#","dataKind":"#)
        json.string(text.dataKind)
        json.raw(#","blink":"#)
        json.string(text.blinking)
        json.raw(#","counters":"#)
        json.string(text.counters)
        json.raw(#"},"strings":"#)
        text.scriptStrings(&json)
        json.raw("}")
        return json.bytes
    }

    static func districtRow(_ district: DistrictStatus, text: PageText, lang: String) -> String {
        let incidence = district.incidence.map { "\($0)" } ?? ""
        let rank = switch district.phase {
        case .phase(let phase): Int(phase.rawValue)
        case .outside: -1
        case .noData: -2
        }
        return #"<tr data-ags="\#(district.ags)" data-name="\#(htmlEscaped(district.name))" data-incidence="\#(incidence)" data-rank="\#(rank)"><td><a href="/districts/\#(district.ags)?lang=\#(lang)">\#(htmlEscaped(district.name))</a></td><td class="num">\#(text.incidence(district.incidence))</td><td class="phase"><span class="dot" style="background:\#(MapSVG.fill(district))"></span>\#(htmlEscaped(text.phaseName(district.phase)))</td></tr>"#
    }

    static func bareName(_ name: String) -> String {
        name.hasPrefix("LK ") || name.hasPrefix("SK ") ? String(name.dropFirst(3)) : name
    }

    static func legend(_ ruleSet: RuleSet, text: PageText) -> String {
        var html = #"<ul class="legend" aria-label="\#(htmlEscaped(text.legend))">"#
        for phase in ruleSet.phases {
            html += #"<li><span class="swatch" style="background:\#(phase.color.hex)"></span>\#(htmlEscaped(phase.title(text.language)))</li>"#
        }
        html += #"<li><span class="swatch" style="background:\#(ruleSet.outside.color.hex)"></span>\#(htmlEscaped(text.phaseName(.outside)))</li>"#
        html += #"<li><span class="swatch" style="background:\#(MapSVG.noDataFill)"></span>\#(htmlEscaped(text.phaseName(.noData)))</li>"#
        html += #"<li><span class="swatch hatched"></span>\#(htmlEscaped(text.stale))</li></ul>"#
        return html
    }

    /// The JSON inside a `<script>` element: `<` escaped so no `</script>` in a string can
    /// end the element early (`\u003c` is the same character to JSON).
    static func scriptSafe(_ bytes: [UInt8]) -> String {
        String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
    }

    static func head(title: String, language: Language) -> String {
        #"<!doctype html><html lang="\#(language.rawValue)"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="color-scheme" content="light dark"><title>\#(htmlEscaped(title))</title><style>\#(PageStyle.css)</style></head><body>"#
    }

    /// The page's header: the data badge (kind and day of the data in force), the page's
    /// connection to the daemon where a script polls (`connection`), the link to the same page
    /// in the other language; under it the lines about the data (a failing source, stale
    /// data, a held publication), hidden while there is nothing to say.
    static func header(text: PageText, data: PageDataStatus, connection: Bool = true) -> String {
        let switchTo = "?lang=" + (text.language == .de ? "en" : "de")
        var html = #"<header class="top"><div class="brand"><span class="logo" aria-hidden="true"><i style="background:#E3000F"></i><i style="background:#FFC000"></i><i style="background:#00A651"></i></span>"#
        html += #"<div><h1><a href="/?lang=\#(text.language.rawValue)" style="color:inherit">Ampel</a></h1><p>\#(htmlEscaped(text.tagline))</p></div></div><div class="meta">"#
        let badge = text.badge(data)
        html += #"<span id="data-badge" class="pill data \#(badge.tone.rawValue)" title="\#(htmlEscaped(badge.title))">\#(htmlEscaped(badge.text))</span>"#
        if connection { html += #"<span id="connection" class="pill conn">\#(htmlEscaped(text.connected))</span>"# }
        html += #"<a class="lang" href="\#(htmlEscaped(switchTo))">\#(htmlEscaped(text.otherLanguage))</a></div></header>"#
        let notices = text.notices(data)
        html += #"<div id="data-notice" class="banner" role="alert"\#(notices.isEmpty ? " hidden" : "")>"#
        for notice in notices { html += #"<p id="\#(notice.id)">\#(htmlEscaped(notice.text))</p>"# }
        html += "</div>"
        return html
    }

    /// `{"dataDate","dataKind","held","lastError","source","stale"}`: `data` in the words of
    /// `bridge/info`, which the script's ``PageScript/dataStatus`` reads.
    static func dataJSON(_ data: PageDataStatus, to json: inout JSONWriter) {
        json.raw(#"{"dataDate":"#)
        json.string(data.dataDate)
        json.raw(#","dataKind":"#)
        json.string(data.kind.rawValue)
        json.raw(#","held":"#)
        json.string(data.held)
        json.raw(#","lastError":"#)
        json.string(data.lastError)
        json.raw(#","source":"#)
        json.string(data.source)
        json.raw(#","stale":"#)
        json.bool(data.stale)
        json.raw("}")
    }

    static func footer(text: PageText, ruleSet: RuleSet) -> String {
        #"<footer>\#(htmlEscaped(text.ruleSet)): \#(htmlEscaped(ruleSet.name(text.language))) · \#(htmlEscaped(text.attribution(stateIndicators: ruleSet.readsStateIndicators)))</footer>"#
    }
}
