/// Where an indicator is measured: per district (the 7-day incidence) or per federal state
/// (hospital admissions, intensive-care patients).
public enum IndicatorLevel: String, Sendable, Hashable, Codable, CaseIterable {
    case district
    case state
}

/// The name of an indicator, e.g. `incidence_7d` or `icu_covid_patients`: the key a rule set
/// binds its bounds to and a data source delivers values for. Lower-case letters, digits and
/// `_` only, so that it can stand in topics, metric names and JSON without escaping.
public struct IndicatorName: RawRepresentable, Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init?(rawValue: String) {
        guard !rawValue.isEmpty, rawValue.utf8.count <= 64,
              rawValue.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 }) else { return nil }
        self.rawValue = rawValue
    }

    private init(known: String) { rawValue = known }

    public var description: String { rawValue }
    public static func < (lhs: IndicatorName, rhs: IndicatorName) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let name = IndicatorName(rawValue: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                    debugDescription: "indicator name '\(text)' is not lower-case letters, digits and '_'"))
        }
        self = name
    }

    public func encode(to encoder: any Encoder) throws {
        var single = encoder.singleValueContainer()
        try single.encode(rawValue)
    }

    /// `cases7_per_100k`: the district's 7-day incidence per 100,000 residents, the one
    /// indicator of the incidence rule sets.
    public static let incidence7d = IndicatorName(known: "incidence_7d")
    /// The state's COVID-19 hospital admissions in the last 7 days (`fixierte_7T_Hospitalisierung_Faelle`).
    public static let hospitalisationCases7d = IndicatorName(known: "hospitalisation_cases_7d")
    /// The state's 7-day hospitalisation incidence per 100,000 (`fixierte_7T_Hospitalisierung_Inzidenz`).
    public static let hospitalisationIncidence7d = IndicatorName(known: "hospitalisation_incidence_7d")
    /// COVID-19 patients in the state's intensive care units that day (`faelle_covid_aktuell`).
    public static let icuCovidPatients = IndicatorName(known: "icu_covid_patients")
}

/// An indicator and the level it lives at, as a rule set declares it.
public struct IndicatorKey: Sendable, Hashable, Comparable {
    public let name: IndicatorName
    public let level: IndicatorLevel

    public init(_ name: IndicatorName, _ level: IndicatorLevel) {
        self.name = name
        self.level = level
    }

    public static func < (lhs: IndicatorKey, rhs: IndicatorKey) -> Bool {
        (lhs.name, lhs.level.rawValue) < (rhs.name, rhs.level.rawValue)
    }

    /// The district's 7-day incidence.
    public static let districtIncidence = IndicatorKey(.incidence7d, .district)
}

/// One indicator's value for one region, as the data holds it for a publication day.
public struct IndicatorValue: Sendable, Hashable {
    public let key: IndicatorKey
    /// The state id (`09`, `00` for Germany) or the district's code, by ``IndicatorKey/level``.
    public let region: String
    /// `nil` where the data has no value for the day (e.g. hospitalisations before 2023).
    public let value: Double?
    /// The day the value is for; `nil` with no value.
    public let date: Day?

    public init(key: IndicatorKey, region: String, value: Double?, date: Day?) {
        self.key = key
        self.region = region
        self.value = value
        self.date = value == nil ? nil : date
    }
}

/// One indicator of a signal: its value and whether it set the phase (the signal's
/// `indicators` array, docs/signal.md).
public struct IndicatorReading: Sendable, Hashable {
    public let value: IndicatorValue
    /// Whether this indicator set the phase: its condition held for the phase reached, or, in
    /// the lowest phase, it has a value (every value below every bound keeps it there).
    public let decisive: Bool
    /// The bound it was above when it set the phase, for the reason text.
    public let bound: Double?

    public init(value: IndicatorValue, decisive: Bool, bound: Double? = nil) {
        self.value = value
        self.decisive = decisive
        self.bound = bound
    }

    public var name: IndicatorName { value.key.name }
    public var level: IndicatorLevel { value.key.level }
}

extension IndicatorReading: Encodable {
    private enum Keys: String, CodingKey { case date, decisive, level, name, region, value }

    /// The same object ``write(to:)`` writes, every key present.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(value.date?.iso, forKey: .date)
        try c.encode(decisive, forKey: .decisive)
        try c.encode(level.rawValue, forKey: .level)
        try c.encode(name.rawValue, forKey: .name)
        try c.encode(value.region, forKey: .region)
        try c.encode(value.value, forKey: .value)
    }
}
