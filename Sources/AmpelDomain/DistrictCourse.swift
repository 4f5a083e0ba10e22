import AmpelCore

/// What the publications before today say about one district: its trend and the phase in
/// force. Computed once per publication for every district (``RuleSet/courses(over:region:)``),
/// then read by every signal of that district.
public struct DistrictCourse: Sendable, Hashable {
    /// The course of the set's first indicator (the incidence of the incidence sets); `nil`
    /// without 14 consecutive daily values (or with a 0 a week before).
    public let trend: Trend?
    /// `nil` when the district's value today is not valid (its signal then fails anyway).
    public let inForce: PhaseInForce?

    public init(trend: Trend?, inForce: PhaseInForce?) {
        self.trend = trend
        self.inForce = inForce
    }
}

extension RuleSet {
    /// The course of every district of `region` in the last publication of `window`.
    ///
    /// - Parameter window: publications, oldest first, distinct days; the last is the one in
    ///   force. The walk of ``dayCounts`` starts at the first of them; the trend needs the 14
    ///   calendar days up to the last.
    public func courses(over window: [Dataset], region: Region) -> [String: DistrictCourse] {
        guard let current = window.last else { return [:] }
        return courseHistory(over: window, region: region)[current.date] ?? [:]
    }

    /// The courses of every publication of `window` (oldest first, distinct days), with one
    /// walk per district from the first publication to the last: each day continues the day
    /// before, so a publication's phase in force never depends on where a shorter walk began.
    public func courseHistory(over window: [Dataset], region: Region) -> [Day: [String: DistrictCourse]] {
        guard let current = window.last else { return [:] }
        var result: [Day: [String: DistrictCourse]] = [:]
        for entry in current.districts(in: region) {
            let ags = entry.district.ags
            var measured: [(day: Day, measured: PhaseID)] = []
            var values: [Int: Double] = [:]
            for dataset in window {
                guard let entry = dataset[ags], let measurement = try? measure(entry, on: dataset.date) else { continue }
                measured.append((dataset.date, measurement.phase.id))
                if let value = measurement.readings.first?.value.value {
                    values[dataset.date.daysSinceEpoch] = value
                }
            }
            for (index, inForce) in dayCounts.walk(measured).enumerated() {
                let day = measured[index].day.daysSinceEpoch
                let series = (day - Trend.days + 1...day).compactMap { values[$0] }
                result[measured[index].day, default: [:]][ags] = DistrictCourse(trend: Trend(series: series), inForce: inForce)
            }
        }
        return result
    }
}
