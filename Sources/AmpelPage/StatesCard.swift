import AmpelCore
import AmpelDomain

/// The states card: Germany's and the region's states' hospital and intensive-care
/// indicators, each with its value, its day and a sparkline of its last 14 days, and the
/// phase the rule set gives the state; rendered on the server, without script.
public enum StatesCard {
    public static func render(_ reports: [StateReport], ruleSet: RuleSet, text: PageText) -> String {
        guard !reports.isEmpty else { return "" }
        var html = #"<section class="card wide" id="states" aria-labelledby="h-states"><h2 id="h-states">\#(htmlEscaped(text.countryAndStates))</h2>"#
        html += #"<div class="scroll"><table id="state-table"><thead><tr><th>\#(htmlEscaped(text.name))</th>"#
        let keys = reports[0].indicators.map(\.key)
        for key in keys {
            html += #"<th class="num">\#(htmlEscaped(ruleSet.declaration(of: key).title(text.language)))</th>"#
        }
        html += #"<th class="phase">\#(htmlEscaped(text.phase))</th></tr></thead><tbody>"#
        for report in reports {
            html += #"<tr data-state="\#(report.id)"><td>\#(htmlEscaped(report.name))</td>"#
            for value in report.indicators {
                let shown = value.value.map { text.number($0) } ?? "–"
                let day = value.date.map { text.date($0) } ?? text.noValue
                html += #"<td class="num" data-indicator="\#(value.key.name.rawValue)"><span class="value">\#(shown)</span> "#
                html += sparkline(report.series[value.key] ?? [], label: ruleSet.declaration(of: value.key).title(text.language) + ", " + report.name)
                html += #"<br><span class="note">\#(htmlEscaped(day))</span></td>"#
            }
            if let phase = report.phase {
                html += #"<td class="phase"><span class="chip" style="background:\#(phase.color.hex)"></span> \#(htmlEscaped(text.phaseName(.phase(phase.id))))</td>"#
            } else {
                html += #"<td class="phase">–</td>"#
            }
            html += "</tr>"
        }
        html += #"</tbody></table></div><p class="note">\#(htmlEscaped(text.statesNote))</p></section>"#
        return html
    }

    /// A line over the days that have a value, scaled to its own range: a trend, not a chart.
    static func sparkline(_ series: [Double?], label: String) -> String {
        let points = series.enumerated().compactMap { index, value in value.map { (index, $0) } }
        guard points.count >= 2 else { return "" }
        let width = 70.0, height = 18.0
        let low = points.map(\.1).min() ?? 0, high = points.map(\.1).max() ?? 0
        let span = max(high - low, 1e-9)
        let step = width / Double(max(series.count - 1, 1))
        let path = points.map { index, value in
            let x = (Double(index) * step * 10).rounded() / 10
            let y = ((height - 2 - (value - low) / span * (height - 4)) * 10).rounded() / 10
            return "\(x),\(y)"
        }.joined(separator: " ")
        return #"<svg class="spark" width="70" height="18" viewBox="0 0 70 18" role="img" aria-label="\#(htmlEscaped(label))"><polyline fill="none" stroke="currentColor" stroke-width="1.5" points="\#(path)"/></svg>"#
    }
}
