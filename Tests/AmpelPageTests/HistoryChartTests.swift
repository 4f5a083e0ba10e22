import AmpelCore
import AmpelData
import AmpelDomain
import AmpelPage
import Foundation
import Testing

@Suite("The history chart: the bundled daily incidence over the phase bands")
struct HistoryChartTests {
    private func rects(_ svg: String) throws -> [[String: String]] {
        let element = try Regex(#"<rect class="band"[^>]*>"#)
        let attribute = try Regex(#"([a-z-]+)="([^"]*)""#)
        return svg.matches(of: element).map { match in
            var out: [String: String] = [:]
            for a in String(svg[match.range]).matches(of: attribute) {
                if let n = a.output[1].substring, let v = a.output[2].substring { out[String(n)] = String(v) }
            }
            return out
        }
    }

    @Test("one band per phase of the rule set, in its colour, stacked at the phase bounds", arguments: ["bavaria", "bavaria-initial"])
    func bandsAtTheBounds(ruleSetName: String) throws {
        let ruleSet = try RuleSetCatalog.bundled(ruleSetName)
        let history = BundledData.shared.dailyHistory.series(ags: "09162")
        #expect(history.count > 300)
        let svg = HistoryChart.render(history: history, ruleSet: ruleSet, text: PageText(.en))
        let bands = try rects(svg)
        #expect(bands.map { $0["data-phase"] } == ruleSet.phases.map(\.id.id))
        #expect(bands.map { $0["fill"] } == ruleSet.phases.map(\.color.hex))
        // Each band's top is the next band's bottom: y + height of band k+1 == y of band k.
        for (lower, upper) in zip(bands, bands.dropFirst()) {
            let lowerTop = try #require(Double(lower["y"] ?? ""))
            let upperBottom = try #require(Double(upper["y"] ?? "")) + (try #require(Double(upper["height"] ?? "")))
            #expect(abs(lowerTop - upperBottom) < 0.11)
        }
        // The bands' bottoms are the rule set's lower bounds, placed on the value axis.
        let top = HistoryChart.axisTop(values: history.map(\.incidence), bands: ruleSet.classifier?.bands ?? [])
        #expect(top >= history.map(\.incidence).max()!)
        let plotBottom = HistoryChart.height - 30
        for (band, rect) in zip(ruleSet.classifier?.bands ?? [], bands) {
            let lower = band.lower?.value ?? 0
            let y = try #require(Double(rect["y"] ?? "")) + (try #require(Double(rect["height"] ?? "")))
            let expected = plotBottom - (HistoryChart.height - 42) * lower / top
            #expect(abs(y - expected) < 0.11, "bottom of \(band.phase.id)")
        }
    }

    @Test("the line has one vertex per day of the history, and month labels in the page language")
    func lineAndLabels() throws {
        let history = BundledData.shared.dailyHistory.series(ags: "09780")
        let svg = HistoryChart.render(history: history, ruleSet: RuleSetCatalog.standard(), text: PageText(.de))
        let series = try #require(svg.firstMatch(of: try Regex(#"<path class="series" d="([^"]*)""#)))
        let d = String(svg[series.range])
        #expect(occurrences(of: "L", in: d) == history.count - 1)
        #expect(svg.contains(">Mär<"))
        #expect(svg.contains(">Jan 2021<"))
        let en = HistoryChart.render(history: history, ruleSet: RuleSetCatalog.standard(), text: PageText(.en))
        #expect(en.contains(">Mar<"))
    }
}
