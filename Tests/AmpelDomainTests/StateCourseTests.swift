import AmpelDomain
import Testing

/// The states' 14-day series: each value by the day it is for, whichever publication carried it.
@Suite struct StateCourseTests {
    static let key = IndicatorKey(.hospitalisationCases7d, .state)

    /// A live daemon's publications: each day's carries the hospitalisation value of the day
    /// before (that file is a day behind the register's).
    static func publications(days: Int, lag: Int) -> [Dataset] {
        let first = Day(iso: "2024-03-01")!.daysSinceEpoch
        return (0..<days).map { offset in
            let day = Day(daysSinceEpoch: first + offset)
            let valueDay = Day(daysSinceEpoch: first + offset - lag)
            let value = IndicatorValue(key: key, region: "09", value: Double(100 + offset - lag), date: valueDay)
            return Dataset(date: day, source: "rki", districts: [:], states: ["09": [value]])
        }
    }

    @Test("a value a day behind its publication still stands on its own day in the series")
    func laggingValuesFillTheSeries() throws {
        let window = Self.publications(days: 20, lag: 1)
        let ruleSet = try RuleSetCatalog.bundled("krankenhausampel-2021")
        let newest = try #require(window.last).withCourses(window: window, ruleSet: ruleSet, region: ruleSet.region)
        let series = try #require(newest.stateCourses["09"]?[Self.key])
        #expect(series.count == Trend.days)
        // The newest day has no value of its own yet; the 13 before it have theirs.
        #expect(series.last == .some(nil))
        #expect(series.dropLast() == (6...18).map { Optional(Double(100 + $0)) }[...])
    }

    @Test("values on their own day, as the bundled files have them")
    func sameDayValues() throws {
        let window = Self.publications(days: 20, lag: 0)
        let ruleSet = try RuleSetCatalog.bundled("krankenhausampel-2021")
        let newest = try #require(window.last).withCourses(window: window, ruleSet: ruleSet, region: ruleSet.region)
        #expect(newest.stateCourses["09"]?[Self.key] == (6...19).map { Optional(Double(100 + $0)) })
    }
}
