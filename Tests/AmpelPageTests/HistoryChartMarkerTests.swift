import AmpelCore
import AmpelData
import AmpelDomain
import AmpelPage
import Foundation
import Testing

@Suite("The history chart's data-day marker and hover texts")
struct HistoryChartMarkerTests {
    let history = BundledData.shared.dailyHistory.series(ags: "09162")
    let ruleSet = RuleSetCatalog.standard()

    /// The `<g class="data-day" …>…</g>` of a chart, if it has one.
    private func marker(_ svg: String) throws -> String? {
        try svg.firstMatch(of: Regex(#"<g class="data-day"[^>]*>.*?</g>"#)).map { String(svg[$0.range]) }
    }

    private func number(_ name: String, in element: String) throws -> Double? {
        try element.firstMatch(of: Regex(name + #"="([-0-9.]+)""#)).flatMap { Double($0.output[1].substring ?? "") }
    }

    @Test("a vertical line at the data day, labelled with it in the page language, and a dot on its value")
    func markerAtTheDataDay() throws {
        let day = try #require(Day(iso: "2021-03-01"))
        let svg = HistoryChart.render(history: history, ruleSet: ruleSet, text: PageText(.en), dataDay: day)
        let group = try #require(try marker(svg), "no marker")
        #expect(group.hasPrefix(#"<g class="data-day" data-date="2021-03-01">"#))
        #expect(group.contains(">Data date 2021-03-01</text>"))
        // The line stands where the day is on the time axis: its share of the history's span.
        let first = try #require(history.first?.day), last = try #require(history.last?.day)
        let share = Double(day.daysSinceEpoch - first.daysSinceEpoch) / Double(last.daysSinceEpoch - first.daysSinceEpoch)
        let x = try #require(try number("x1", in: group))
        #expect(abs(x - (52 + (HistoryChart.width - 64) * share)) < 0.11)
        #expect(try number("x2", in: group) == x)
        // Early in the history: the label reads to the right of the line.
        #expect(group.contains(#"text-anchor="start""#))
        // The dot sits on the day's value, where the line passes.
        let value = try #require(history.first { $0.day == day }?.incidence)
        let top = HistoryChart.axisTop(values: history.map(\.incidence), bands: ruleSet.classifier?.bands ?? [])
        let cy = try #require(try number("cy", in: group))
        #expect(abs(cy - (12 + (HistoryChart.height - 42) * (1 - value / top))) < 0.11)

        let german = HistoryChart.render(history: history, ruleSet: ruleSet, text: PageText(.de), dataDay: day)
        #expect(try marker(german)?.contains(">Datenstand 01.03.2021</text>") == true)
        // Late in the history the label reads to the left, inside the plot.
        let late = HistoryChart.render(history: history, ruleSet: ruleSet, text: PageText(.en), dataDay: try #require(Day(iso: "2021-11-01")))
        #expect(try marker(late)?.contains(#"text-anchor="end""#) == true)
    }

    @Test("no marker for a data day the history does not cover, or none; the district page says so")
    func noMarkerOutside() throws {
        #expect(try marker(HistoryChart.render(history: history, ruleSet: ruleSet, text: PageText(.en), dataDay: Day(iso: "2020-10-15"))) == nil)
        #expect(try marker(HistoryChart.render(history: history, ruleSet: ruleSet, text: PageText(.en), dataDay: Day(iso: "2021-11-23"))) == nil)
        #expect(try marker(HistoryChart.render(history: history, ruleSet: ruleSet, text: PageText(.en))) == nil)

        func page(_ date: String) -> String {
            let district = DistrictStatus(ags: "09162", name: "SK München", incidence: 39.8, phase: .phase(.yellow), color: nil)
            return DistrictPage.render(DistrictPageModel(language: .en, ruleSet: ruleSet,
                                                         data: PageDataStatus(dataDate: date, source: "history", stale: false),
                                                         district: district, history: history))
        }
        let outside = page("2020-10-15")
        #expect(outside.contains(#"id="data-day-outside">The data date 2020-10-15 lies outside the history"#))
        #expect(!outside.contains(#"class="data-day""#))
        let inside = page("2021-03-01")
        #expect(inside.contains(#"<g class="data-day" data-date="2021-03-01">"#))
        #expect(!inside.contains("data-day-outside"))
    }

    @Test("hovering names each day: one <title> per day with date, incidence and phase, over that day's column")
    func hoverTitles() throws {
        let svg = HistoryChart.render(history: history, ruleSet: ruleSet, text: PageText(.en))
        let columns = svg.matches(of: try Regex(#"<rect x="([-0-9.]+)" y="[-0-9.]+" width="([0-9.]+)" height="[0-9.]+"><title>([^<]*)</title></rect>"#))
        #expect(columns.count == history.count)
        let titles = columns.map { String($0.output[3].substring ?? "") }
        #expect(titles.contains("2021-03-01 · Incidence 39.8 · Yellow"), "\(titles.prefix(3))")
        // Each column covers its day's place on the time axis.
        let first = try #require(history.first?.day), last = try #require(history.last?.day)
        let span = Double(last.daysSinceEpoch - first.daysSinceEpoch)
        for (column, point) in zip(columns, history) {
            let x = try #require(Double(column.output[1].substring ?? "")), width = try #require(Double(column.output[2].substring ?? ""))
            let at = 52 + (HistoryChart.width - 64) * Double(point.day.daysSinceEpoch - first.daysSinceEpoch) / span
            #expect(x <= at && at <= x + width, "\(point.day)")
        }
        let german = HistoryChart.render(history: history, ruleSet: ruleSet, text: PageText(.de))
        #expect(german.contains("<title>01.03.2021 · Inzidenz 39,8 · Gelb</title>"))
        // The phase is the rule set's for the value: a darkred day reads so.
        let darkred = try #require(history.first { $0.incidence >= 100 })
        #expect(HistoryChart.hoverText(darkred, ruleSet: ruleSet, text: PageText(.en)).hasSuffix(" · Dark red"))
    }
}
