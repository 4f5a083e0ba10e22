import AmpelCore
import AmpelDomain

/// `/districts/{ags}`: the rules in force in one district and its bundled history chart,
/// all rendered on the server.
public enum DistrictPage {
    public static func render(_ model: DistrictPageModel) -> String {
        let text = PageText(model.language, region: model.ruleSet.region)
        let district = model.district
        let lang = model.language.rawValue
        var html = StatusPage.head(title: district.name + " – Ampel", language: model.language)
        html += StatusPage.header(text: text, data: model.data, connection: false)
        html += #"<main class="district-page"><p><a href="/?lang=\#(lang)">← \#(htmlEscaped(text.back))</a></p>"#

        html += #"<section class="card" id="district" data-ags="\#(district.ags)" data-phase="\#(district.phase.id)"><div class="phase-head"><span class="big" style="background:\#(MapSVG.fill(district))"></span><div>"#
        // Under a set of state indicators the district has no incidence of its own: its reason says what decided.
        let measured = district.reason == nil ? " · \(htmlEscaped(text.incidence)) \(text.incidence(district.incidence))" : ""
        html += #"<h2>\#(htmlEscaped(district.name))</h2><p>\#(htmlEscaped(text.phaseName(district.phase)))\#(measured) · \#(htmlEscaped(text.dataDate)) \#(htmlEscaped(model.data.dataDate ?? "–"))\#(model.data.stale ? " (" + htmlEscaped(text.stale) + ")" : "")</p></div></div>"#
        let title: String, rules: [String]
        switch district.phase {
        case .phase(let phase):
            let phaseRules = model.ruleSet.rules(for: phase)
            title = phaseRules?.title(model.language) ?? text.phaseName(district.phase)
            rules = phaseRules?.rules(model.language) ?? []
        case .outside:
            title = model.ruleSet.outside.title(model.language)
            rules = model.ruleSet.outside.rules(model.language)
        case .noData:
            title = text.phaseName(.noData)
            rules = []
        }
        if let reason = district.reason {
            html += #"<p id="reason">\#(htmlEscaped(reason))</p>"#
        }
        html += #"<h3>\#(htmlEscaped(text.rulesInForce)): \#(htmlEscaped(title))</h3>"#
        if !rules.isEmpty {
            html += #"<ul class="rules" id="rules">"# + rules.map { "<li>" + htmlEscaped($0) + "</li>" }.joined() + "</ul>"
        }
        if district.phase != .noData {
            html += #"<h3>\#(htmlEscaped(text.always))</h3><ul class="rules" id="always">"# + model.ruleSet.always(model.language).map { "<li>" + htmlEscaped($0) + "</li>" }.joined() + "</ul>"
        }
        html += "</section>"

        html += StatesCard.render(model.states, ruleSet: model.ruleSet, text: text)
        html += #"<section class="card"><h2>\#(htmlEscaped(text.history))</h2>"#
        if model.history.isEmpty {
            html += #"<p class="note">\#(htmlEscaped(text.noHistory))</p>"#
        } else {
            let dataDay = model.data.dataDate.flatMap { Day(iso: $0) }
            html += HistoryChart.render(history: model.history, ruleSet: model.ruleSet, text: text, dataDay: dataDay)
            html += #"<p class="note">\#(htmlEscaped(text.historyNote))</p>"#
            if let dataDay, let first = model.history.first?.day, let last = model.history.last?.day, dataDay < first || dataDay > last {
                html += #"<p class="note" id="data-day-outside">\#(htmlEscaped(text.dataDayOutsideHistory(dataDay)))</p>"#
            }
        }
        html += "</section></main>"
        html += StatusPage.footer(text: text, ruleSet: model.ruleSet)
        html += "</body></html>"
        return html
    }
}
