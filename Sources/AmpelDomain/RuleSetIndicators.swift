import AmpelCore
import Foundation

/// An indicator a rule set reads: which one, at which level, and how to speak of it.
public struct IndicatorDeclaration: Sendable, Hashable {
    public let key: IndicatorKey
    /// What the indicator is, e.g. "COVID-19 patients in intensive care".
    public let title: LocalizedText
    /// A sentence part with `{value}` and `{region}`, e.g. "{value} COVID-19 patients in
    /// intensive care in {region}": the reason an alert gives for its phase.
    public let text: LocalizedText

    public init(key: IndicatorKey, title: LocalizedText, text: LocalizedText) {
        self.key = key
        self.title = title
        self.text = text
    }

    /// The indicators Ampel's sources deliver, as people read them, for the places that show
    /// an indicator no rule set in force declares (the states' table, Home Assistant's sensors).
    public static let known: [IndicatorKey: IndicatorDeclaration] = Dictionary(uniqueKeysWithValues: [
        districtIncidence,
        IndicatorDeclaration(
            key: IndicatorKey(.hospitalisationCases7d, .state),
            title: LocalizedText([.de: "COVID-19-Krankenhausaufnahmen in 7 Tagen", .en: "COVID-19 hospital admissions in 7 days"]),
            text: LocalizedText([.de: "{value} COVID-19-Krankenhausaufnahmen in {region} in 7 Tagen", .en: "{value} COVID-19 hospital admissions in {region} in 7 days"])),
        IndicatorDeclaration(
            key: IndicatorKey(.hospitalisationIncidence7d, .state),
            title: LocalizedText([.de: "7-Tage-Hospitalisierungsinzidenz", .en: "7-day hospitalisation incidence"]),
            text: LocalizedText([.de: "7-Tage-Hospitalisierungsinzidenz {value} in {region}", .en: "7-day hospitalisation incidence {value} in {region}"])),
        IndicatorDeclaration(
            key: IndicatorKey(.icuCovidPatients, .state),
            title: LocalizedText([.de: "COVID-19-Patienten auf Intensivstationen", .en: "COVID-19 patients in intensive care"]),
            text: LocalizedText([.de: "{value} COVID-19-Patienten auf Intensivstationen in {region}", .en: "{value} COVID-19 patients in intensive care in {region}"])),
    ].map { ($0.key, $0) })

    /// The one indicator of the incidence sets, which declare none.
    public static let districtIncidence = IndicatorDeclaration(
        key: .districtIncidence,
        title: LocalizedText([.de: "7-Tage-Inzidenz", .en: "7-day incidence"]),
        text: LocalizedText([.de: "7-Tage-Inzidenz {value} in {region}", .en: "7-day incidence {value} in {region}"]))
}

/// One condition of a phase: the indicator's value is above the bound (on data days from
/// `from` on, where the rule was added later).
public struct IndicatorCondition: Sendable, Hashable {
    public let indicator: IndicatorKey
    public let above: Double
    public let from: Day?

    public init(indicator: IndicatorKey, above: Double, from: Day? = nil) {
        self.indicator = indicator
        self.above = above
        self.from = from
    }

    /// Whether the condition is in force on `day` and `value` exceeds its bound.
    public func holds(_ value: Double?, on day: Day) -> Bool {
        guard let value, from.map({ day >= $0 }) ?? true else { return false }
        return value > above
    }
}

/// How a rule set turns the data of a district into a phase.
public enum PhaseMeasure: Sendable, Hashable {
    /// One band per phase over the district's 7-day incidence (the sets of 2020 and 2021).
    case bands(Classifier)
    /// Conditions per phase over declared indicators: a phase is reached when any of its
    /// conditions holds, the highest phase reached wins, the first phase (no conditions) holds
    /// otherwise. Ordered from the first phase to the last.
    case conditions([(phase: PhaseID, conditions: [IndicatorCondition])])

    public static func == (lhs: PhaseMeasure, rhs: PhaseMeasure) -> Bool {
        switch (lhs, rhs) {
        case (.bands(let a), .bands(let b)): a == b
        case (.conditions(let a), .conditions(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.phase == $1.phase && $0.conditions == $1.conditions }
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .bands(let classifier): hasher.combine(classifier)
        case .conditions(let phases):
            for entry in phases {
                hasher.combine(entry.phase)
                hasher.combine(entry.conditions)
            }
        }
    }
}

/// What the data of one district gives under a rule set: the phase, and each indicator the
/// set reads with its value and whether it decided.
public struct Measurement: Sendable, Hashable {
    public let phase: PhaseRules
    public let readings: [IndicatorReading]
    /// False when an indicator the set reads has no value: the phase then comes from the
    /// indicators that have one.
    public var complete: Bool { readings.allSatisfy { $0.value.value != nil } }
}

extension RuleSet {
    /// How to speak of `key`: this set's declaration, else the known one, else its name.
    public func declaration(of key: IndicatorKey) -> IndicatorDeclaration {
        indicators.first { $0.key == key } ?? IndicatorDeclaration.known[key]
            ?? IndicatorDeclaration(key: key, title: LocalizedText([.en: key.name.rawValue]), text: LocalizedText([.en: "{value} " + key.name.rawValue]))
    }

    /// Whether the set reads anything but the district incidence (it then needs the
    /// indicator sources, not only the incidence data).
    public var readsStateIndicators: Bool { indicators.contains { $0.key != .districtIncidence } }

    /// The phase the district's data gives on `day`, with the indicators that gave it.
    ///
    /// - Throws: ``SignalError`` when the data gives no phase: an invalid incidence, or no
    ///   value for any indicator of the set.
    public func measure(_ entry: DistrictIncidence, on day: Day) throws(SignalError) -> Measurement {
        let district = entry.district
        switch measure {
        case .bands(let classifier):
            guard let incidence = entry.incidence else {
                throw SignalError("district \(district.ags) (\(district.name)): no incidence in the data of \(day.iso)")
            }
            let id: PhaseID
            do {
                id = try classifier.classify(incidence)
            } catch {
                throw SignalError("district \(district.ags) (\(district.name)): \(error)")
            }
            let phase = rules(for: id) ?? phases[phases.count - 1]
            let bound = phase.band.lower.map(\.value)
            let value = IndicatorValue(key: .districtIncidence, region: district.ags, value: incidence, date: day)
            return Measurement(phase: phase, readings: [IndicatorReading(value: value, decisive: true, bound: bound)])
        case .conditions(let levels):
            let values = indicators.map { declared -> IndicatorValue in
                let known = entry.value(of: declared.key)
                // The district incidence is the publication's own: its day is the data day.
                return IndicatorValue(key: declared.key, region: known?.region ?? region(of: declared.key, district),
                                      value: known?.value, date: known?.date ?? day)
            }
            guard values.contains(where: { $0.value != nil }) else {
                throw SignalError("district \(district.ags) (\(district.name)): no value for \(indicators.map(\.key.name.rawValue).joined(separator: ", ")) in the data of \(day.iso)")
            }
            for level in levels.reversed() where !level.conditions.isEmpty {
                var decided: [IndicatorKey: Double] = [:]
                for condition in level.conditions {
                    let reading = values.first { $0.key == condition.indicator }
                    if condition.holds(reading?.value, on: day) {
                        decided[condition.indicator] = min(decided[condition.indicator] ?? .infinity, condition.above)
                    }
                }
                guard !decided.isEmpty, let phase = rules(for: level.phase) else { continue }
                return Measurement(phase: phase, readings: values.map {
                    IndicatorReading(value: $0, decisive: decided[$0.key] != nil, bound: decided[$0.key])
                })
            }
            // Below every bound: each indicator with a value keeps the set in its first phase.
            return Measurement(phase: phases[0], readings: values.map { IndicatorReading(value: $0, decisive: $0.value != nil) })
        }
    }

    /// The region an indicator of `key`'s level is measured in for `district`.
    func region(of key: IndicatorKey, _ district: District) -> String {
        key.level == .state ? String(district.stateCode) : district.ags
    }

    /// Why the phase is what it is, in one line: "Red: 653 COVID-19 patients in intensive care
    /// in Bayern, above 600". The decisive indicators only; `nil` without any.
    public func reason(_ measurement: Measurement, district: District, language: Language) -> String? {
        let parts = measurement.readings.filter(\.decisive).compactMap { reading -> String? in
            guard let value = reading.value.value,
                  let declaration = indicators.first(where: { $0.key == reading.value.key }) else { return nil }
            let place = reading.level == .state ? GermanState.names[reading.value.region] ?? reading.value.region : district.name
            var text = declaration.text(language)
                .replacingOccurrences(of: "{value}", with: NumberText.short(value, language))
                .replacingOccurrences(of: "{region}", with: place)
            if let bound = reading.bound, reading.level == .state || bound > 0 {
                // A band's inclusive lower bound (35 under `bavaria`) is reached, not exceeded.
                let reached = classifier != nil && measurement.phase.band.lower?.inclusive == true
                let word = reached ? (language == .de ? ", ab " : ", at least ") : (language == .de ? ", über " : ", above ")
                text += word + NumberText.short(bound, language)
            }
            return text
        }
        guard !parts.isEmpty else { return nil }
        return "\(measurement.phase.id.displayName(language)): " + parts.joined(separator: "; ")
    }
}

extension PhaseID {
    /// The phase's name as people read it: "Red", "Rot".
    public func displayName(_ language: Language) -> String {
        switch (self, language) {
        case (.green, .de): "Grün"
        case (.green, .en): "Green"
        case (.yellow, .de): "Gelb"
        case (.yellow, .en): "Yellow"
        case (.red, .de): "Rot"
        case (.red, .en): "Red"
        case (.darkred, .de): "Dunkelrot"
        case (.darkred, .en): "Dark red"
        }
    }
}

/// A value as people read it: whole numbers without decimals, others with up to two, with a
/// decimal comma in German; the one way Ampel writes an indicator's value or bound for people.
public enum NumberText {
    public static func short(_ value: Double, _ language: Language) -> String {
        let rounded = (value * 100).rounded() / 100
        // Beyond Int's range (no real value is) as Swift writes it, instead of trapping.
        var text = rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int(rounded)) : String(rounded)
        if language == .de { text = text.replacingOccurrences(of: ".", with: ",") }
        return text
    }
}
