import AmpelCore
import AmpelDomain
import ArgumentParser
import Foundation

/// `ampel rules`: the phases of a rule set with bounds, colours and texts.
struct Rules: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the phases, bounds, colours and rules of a rule set.",
        discussion: """
            Example:
              ampel rules --rules notbremse-2021 --lang de
            """)

    @OptionGroup var ruleSetOptions: RuleSetOptions
    @OptionGroup var languageOptions: LanguageOptions
    @Flag(name: .long, help: "Print JSON instead of text.") var json = false
    @OptionGroup var colorOptions: ColorOptions

    struct PhaseOut: Encodable {
        let id: String
        let color: String
        let lower: Double?
        let lowerInclusive: Bool?
        let upper: Double?
        let upperInclusive: Bool?
        let range: String
        /// The conditions of a set of indicators (any one reaches the phase); empty for a band.
        let when: [ConditionOut]
        let title: String
        let rules: [String]
    }

    struct ConditionOut: Encodable {
        let indicator: String
        let level: String
        let above: Double
        /// The first data day the condition applies to; `null` for always.
        let from: String?

        enum CodingKeys: String, CodingKey { case indicator, level, above, from }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(indicator, forKey: .indicator)
            try c.encode(level, forKey: .level)
            try c.encode(above, forKey: .above)
            try c.encode(from, forKey: .from)
        }
    }

    struct IndicatorOut: Encodable {
        let name: String
        let level: String
        let title: String
    }

    struct Out: Encodable {
        let ruleSet: String
        let name: String
        let lang: String
        /// What the bounds apply to: the district incidence, or the declared indicators.
        let indicators: [IndicatorOut]
        let phases: [PhaseOut]
        let always: [String]
    }

    func run() throws {
        let ruleSet = try ruleSetOptions.load()
        let language = languageOptions.language
        let conditions: [PhaseID: [IndicatorCondition]]
        if case .conditions(let levels) = ruleSet.measure {
            conditions = Dictionary(levels.map { ($0.phase, $0.conditions) }, uniquingKeysWith: { first, _ in first })
        } else {
            conditions = [:]
        }
        let phases = ruleSet.phases.map { phase in
            let when = (conditions[phase.id] ?? []).map {
                ConditionOut(indicator: $0.indicator.name.rawValue, level: $0.indicator.level.rawValue, above: $0.above, from: $0.from?.iso)
            }
            return PhaseOut(
                id: phase.id.id, color: phase.color.hex,
                lower: phase.band.lower?.value, lowerInclusive: phase.band.lower?.inclusive,
                upper: phase.band.upper?.value, upperInclusive: phase.band.upper?.inclusive,
                range: ruleSet.classifier == nil ? Rules.range(when, language) : Rules.range(phase.band, language),
                when: when, title: phase.title(language), rules: phase.rules(language))
        }
        let indicators = ruleSet.indicators.map {
            IndicatorOut(name: $0.key.name.rawValue, level: $0.key.level.rawValue, title: $0.title(language))
        }
        if json {
            print(try AmpelJSON.string(Out(ruleSet: ruleSet.id, name: ruleSet.name(language), lang: language.rawValue,
                                           indicators: indicators, phases: phases, always: ruleSet.always(language)), pretty: true))
            return
        }
        let terminal = Terminal(colorOptions)
        print(terminal.bold(ruleSet.name(language)) + terminal.dim("  [\(ruleSet.id)]"))
        let de = language == .de
        for indicator in indicators {
            let level = indicator.level == "state" ? (de ? "Land" : "state") : (de ? "Landkreis" : "district")
            print(terminal.dim("  \(indicator.name): \(indicator.title) (\(level))"))
        }
        print("")
        for (phase, out) in zip(ruleSet.phases, phases) {
            print(terminal.paint("● \(out.title)", phase.color, bold: true) + terminal.dim("  \(out.id) \(out.color)  \(out.range)"))
            for rule in out.rules { print("    • \(rule)") }
            print("")
        }
        print(terminal.bold(language == .de ? "Immer:" : "Always:"))
        for rule in ruleSet.always(language) { print("    • \(rule)") }
    }

    /// `hospitalisation_cases_7d > 1200 or icu_covid_patients > 450 (from 2021-11-06)`; the
    /// first phase of a set of indicators: `otherwise`.
    static func range(_ conditions: [ConditionOut], _ language: Language) -> String {
        guard !conditions.isEmpty else { return language == .de ? "sonst" : "otherwise" }
        return conditions.map { condition in
            let bound = NumberText.short(condition.above, language)
            let from = condition.from.map { language == .de ? " (ab \($0))" : " (from \($0))" } ?? ""
            return "\(condition.indicator) > \(bound)\(from)"
        }.joined(separator: language == .de ? " oder " : " or ")
    }

    /// `35 ≤ x ≤ 50`, `x < 35`, `x > 100`.
    static func range(_ band: Band, _ language: Language) -> String {
        func n(_ value: Double) -> String {
            NumberText.short(value, language)
        }
        switch (band.lower, band.upper) {
        case let (lower?, upper?):
            return "\(n(lower.value)) \(lower.inclusive ? "≤" : "<") x \(upper.inclusive ? "≤" : "<") \(n(upper.value))"
        case let (lower?, nil):
            return "x \(lower.inclusive ? "≥" : ">") \(n(lower.value))"
        case let (nil, upper?):
            return "x \(upper.inclusive ? "≤" : "<") \(n(upper.value))"
        case (nil, nil):
            return language == .de ? "jede Inzidenz" : "any incidence"
        }
    }
}
