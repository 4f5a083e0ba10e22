/// What one publication says about one district: its 7-day incidence and the other
/// indicators (its state's hospital and intensive-care values) the data holds for it.
public struct DistrictIncidence: Sendable, Hashable {
    public let district: District
    /// `cases7_per_100k`: cases in the last 7 days per 100,000 residents; `nil` in a
    /// publication of state indicators, which has no district incidence.
    public let incidence: Double?
    /// `cases7_bl_per_100k`: the same for the district's state, where known.
    public let stateIncidence: Double?
    /// The values of indicators other than the district incidence, e.g. the state's
    /// `icu_covid_patients`; empty in an incidence publication.
    public let indicators: [IndicatorValue]

    public init(district: District, incidence: Double?, stateIncidence: Double?, indicators: [IndicatorValue] = []) {
        self.district = district
        self.incidence = incidence
        self.stateIncidence = stateIncidence
        self.indicators = indicators
    }

    /// The value of `key` for this district, if the publication holds it.
    public func value(of key: IndicatorKey) -> IndicatorValue? {
        if key == .districtIncidence {
            return incidence.map { IndicatorValue(key: key, region: district.ags, value: $0, date: nil) }
        }
        return indicators.first { $0.key == key }
    }
}

/// The incidences of one publication: every district the source reported on one day.
public struct Dataset: Sendable, Hashable {
    /// The publication day (`last_update` of the RKI layer).
    public let date: Day
    /// Where the data came from, e.g. `rki`, `snapshot:2020-11-05`, `history`.
    public let source: String
    /// Keyed by the five-digit RS.
    public let districts: [String: DistrictIncidence]
    /// Trend and phase in force of each district, from the publications before this one under
    /// one rule set (``RuleSet/courses(over:region:)``); empty where no history was at hand.
    /// Not part of the publication itself: caches and history files leave it out.
    public var courses: [String: DistrictCourse]
    /// The state indicators of this publication by state id (`09`; `00` for Germany): what
    /// the districts' ``DistrictIncidence/indicators`` hold, and the country's too. Empty in an
    /// incidence publication.
    public let states: [String: [IndicatorValue]]
    /// Each state indicator's values over the ``Trend/days`` days up to this publication,
    /// oldest first (`nil` where a day has none), from the same window as ``courses``.
    public var stateCourses: [String: [IndicatorKey: [Double?]]]

    public init(date: Day, source: String, districts: [String: DistrictIncidence], courses: [String: DistrictCourse] = [:],
                states: [String: [IndicatorValue]] = [:]) {
        self.date = date
        self.source = source
        self.districts = districts
        self.courses = courses
        self.states = states
        stateCourses = [:]
    }

    /// This publication with the courses `ruleSet` gives over `window` (oldest first, ending
    /// with this publication; earlier days only are taken from it).
    public func withCourses(window: [Dataset], ruleSet: RuleSet, region: Region) -> Dataset {
        var copy = self
        let walked = window.filter { $0.date < date } + [self]
        copy.courses = ruleSet.courses(over: walked, region: region)
        if !states.isEmpty {
            // Each value by the day it is for, whichever publication carried it: a file a day
            // behind the other carries yesterday's value in today's publication.
            var byDay: [String: [IndicatorKey: [Int: Double]]] = [:]
            for publication in walked {
                for (state, values) in publication.states {
                    for value in values {
                        guard let number = value.value, let day = value.date?.daysSinceEpoch else { continue }
                        byDay[state, default: [:]][value.key, default: [:]][day] = number
                    }
                }
            }
            let days = (date.daysSinceEpoch - Trend.days + 1)...date.daysSinceEpoch
            for (state, values) in states {
                for value in values {
                    let known = byDay[state]?[value.key] ?? [:]
                    copy.stateCourses[state, default: [:]][value.key] = days.map { known[$0] }
                }
            }
        }
        return copy
    }

    public subscript(ags: String) -> DistrictIncidence? { districts[ags] }

    /// The same publication: date, source and values. ``courses`` are derived from it and the
    /// history before it, so they do not make another publication.
    public static func == (lhs: Dataset, rhs: Dataset) -> Bool {
        lhs.date == rhs.date && lhs.source == rhs.source && lhs.districts == rhs.districts && lhs.states == rhs.states
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(date)
        hasher.combine(source)
        hasher.combine(districts)
        hasher.combine(states)
    }

    /// The districts of `region`, ordered by code.
    public func districts(in region: Region) -> [DistrictIncidence] {
        districts.values.filter { region.contains(ags: $0.district.ags) }.sorted { $0.district.ags < $1.district.ags }
    }
}
