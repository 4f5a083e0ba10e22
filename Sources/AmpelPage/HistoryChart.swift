import AmpelCore
import AmpelDomain

/// A district's daily incidence as an SVG line over the rule set's phase bands.
///
/// Rendered on the server, so the district page needs no script and no chart library.
public enum HistoryChart {
    public static let width = 760.0
    public static let height = 300.0
    static let left = 52.0, right = 12.0, top = 12.0, bottom = 30.0

    /// The top of the value axis: above the highest value and far enough above the strictest
    /// phase's lower bound that its band shows.
    public static func axisTop(values: [Double], bands: [Band]) -> Double {
        let highestBound = bands.compactMap { $0.lower?.value }.max() ?? 0
        let wanted = max(values.max() ?? 0, highestBound * 1.3, 10)
        let step = axisStep(wanted)
        return (wanted / step).rounded(.up) * step
    }

    /// A round step that gives at most six grid lines up to `top`.
    static func axisStep(_ top: Double) -> Double {
        for step in [5.0, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000] where top / step <= 6 {
            return step
        }
        return (top / 6).rounded(.up)
    }

    /// - Parameter dataDay: the day of the data in force: marked with a vertical line and its
    ///   label when the history covers it.
    public static func render(history: [(day: Day, incidence: Double)], ruleSet: RuleSet, text: PageText, dataDay: Day? = nil) -> String {
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        let values = history.map(\.incidence)
        // A set of indicator conditions has no incidence bands: the line stands alone.
        let bands = ruleSet.classifier?.bands ?? []
        let yTop = axisTop(values: values, bands: bands)
        func y(_ value: Double) -> Double { top + plotHeight * (1 - min(value, yTop) / yTop) }
        let firstDay = history.first?.day.daysSinceEpoch ?? 0
        let span = max(Double((history.last?.day.daysSinceEpoch ?? 1) - firstDay), 1)
        func x(_ day: Day) -> Double { left + plotWidth * Double(day.daysSinceEpoch - firstDay) / span }
        func n(_ v: Double) -> String { MapShapes.decimal(tenths: Int((v * 10).rounded())) }

        var svg = #"<svg class="chart" viewBox="0 0 \#(n(width)) \#(n(height))" role="img" aria-label="\#(htmlEscaped(text.history + ": " + text.incidenceLong))" xmlns="http://www.w3.org/2000/svg">"#
        svg += #"<g class="bands">"#
        for band in bands {
            let low = band.lower?.value ?? 0
            guard low < yTop else { continue }
            let high = min(band.upper?.value ?? yTop, yTop)
            let colour = ruleSet.rules(for: band.phase)?.color.hex ?? MapSVG.noDataFill
            svg += #"<rect class="band" data-phase="\#(band.phase.id)" data-lower="\#(low)" x="\#(n(left))" y="\#(n(y(high)))" width="\#(n(plotWidth))" height="\#(n(y(low) - y(high)))" fill="\#(colour)"/>"#
        }
        svg += "</g><g class=\"grid\">"
        let step = axisStep(yTop)
        var tick = 0.0
        while tick <= yTop + 1e-9 {
            svg += #"<line x1="\#(n(left))" x2="\#(n(width - right))" y1="\#(n(y(tick)))" y2="\#(n(y(tick)))"/>"#
            svg += #"<text class="y-label" x="\#(n(left - 6))" y="\#(n(y(tick) + 4))" text-anchor="end">\#(Int(tick))</text>"#
            tick += step
        }
        if let first = history.first?.day, let last = history.last?.day {
            var month = Day(year: first.year, month: first.month, day: 1)
            while let m = month, m <= last {
                if m >= first {
                    let label = monthName(m.month, text.language) + (m.month == 1 ? " \(m.year)" : "")
                    svg += #"<line class="x-tick" x1="\#(n(x(m)))" x2="\#(n(x(m)))" y1="\#(n(height - bottom))" y2="\#(n(height - bottom + 5))"/>"#
                    svg += #"<text class="x-label" x="\#(n(x(m)))" y="\#(n(height - 8))" text-anchor="middle">\#(label)</text>"#
                }
                month = m.month == 12 ? Day(year: m.year + 1, month: 1, day: 1) : Day(year: m.year, month: m.month + 1, day: 1)
            }
        }
        svg += "</g>"
        if !history.isEmpty {
            var path = ""
            for (i, point) in history.enumerated() {
                path += (i == 0 ? "M" : "L") + n(x(point.day)) + " " + n(y(point.incidence))
            }
            svg += #"<path class="series" d="\#(path)"/>"#
        }
        if let dataDay, let first = history.first?.day, let last = history.last?.day, first <= dataDay, dataDay <= last {
            let at = n(x(dataDay))
            let label = text.dataDate + " " + text.date(dataDay)
            // The label stays inside the plot: to the left of the line in the right half.
            let anchor = x(dataDay) > left + plotWidth / 2 ? "end" : "start"
            let labelX = n(x(dataDay) + (anchor == "end" ? -5 : 5))
            svg += #"<g class="data-day" data-date="\#(dataDay.iso)"><line x1="\#(at)" x2="\#(at)" y1="\#(n(top))" y2="\#(n(height - bottom))"/>"#
            svg += #"<text x="\#(labelX)" y="\#(n(top + 12))" text-anchor="\#(anchor)">\#(htmlEscaped(label))</text>"#
            if let point = history.first(where: { $0.day == dataDay }) {
                svg += #"<circle cx="\#(at)" cy="\#(n(y(point.incidence)))" r="4"/>"#
            }
            svg += "</g>"
        }
        if !history.isEmpty {
            // One column per day across the plot's height: hovering anywhere above a day names
            // it (the native tooltip of `<title>`, so the page needs no script).
            let column = plotWidth / (span + 1)
            svg += #"<g class="hover" fill="transparent">"#
            for point in history {
                svg += #"<rect x="\#(n(x(point.day) - column / 2))" y="\#(n(top))" width="\#(n(column))" height="\#(n(plotHeight))"><title>\#(htmlEscaped(hoverText(point, ruleSet: ruleSet, text: text)))</title></rect>"#
            }
            svg += "</g>"
        }
        svg += "</svg>"
        return svg
    }

    /// What hovering over a day shows: `2021-03-01 · Incidence 123.4 · Red` (German:
    /// `01.03.2021 · Inzidenz 123,4 · Rot`); the phase is the one the rule set gives the value.
    public static func hoverText(_ point: (day: Day, incidence: Double), ruleSet: RuleSet, text: PageText) -> String {
        var parts = [text.date(point.day), text.incidence + " " + text.incidence(point.incidence)]
        if let phase = try? ruleSet.classify(point.incidence) ?? nil { parts.append(text.phaseName(.phase(phase.id))) }
        return parts.joined(separator: " · ")
    }

    static func monthName(_ month: Int, _ language: Language) -> String {
        let de = ["Jan", "Feb", "Mär", "Apr", "Mai", "Jun", "Jul", "Aug", "Sep", "Okt", "Nov", "Dez"]
        let en = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        return (language == .de ? de : en)[(month - 1) % 12]
    }
}
