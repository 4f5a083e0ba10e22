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
        let title: String
        let rules: [String]
    }

    struct Out: Encodable {
        let ruleSet: String
        let name: String
        let lang: String
        let phases: [PhaseOut]
        let always: [String]
    }

    func run() throws {
        let ruleSet = try ruleSetOptions.load()
        let language = languageOptions.language
        let phases = ruleSet.phases.map { phase in
            PhaseOut(
                id: phase.id.id, color: phase.color.hex,
                lower: phase.band.lower?.value, lowerInclusive: phase.band.lower?.inclusive,
                upper: phase.band.upper?.value, upperInclusive: phase.band.upper?.inclusive,
                range: Rules.range(phase.band, language),
                title: phase.title(language), rules: phase.rules(language))
        }
        if json {
            print(try AmpelJSON.string(Out(ruleSet: ruleSet.id, name: ruleSet.name(language), lang: language.rawValue,
                                           phases: phases, always: ruleSet.always(language)), pretty: true))
            return
        }
        let terminal = Terminal(colorOptions)
        print(terminal.bold(ruleSet.name(language)) + terminal.dim("  [\(ruleSet.id)]"))
        print("")
        for (phase, out) in zip(ruleSet.phases, phases) {
            print(terminal.paint("● \(out.title)", phase.color, bold: true) + terminal.dim("  \(out.id) \(out.color)  \(out.range)"))
            for rule in out.rules { print("    • \(rule)") }
            print("")
        }
        print(terminal.bold(language == .de ? "Immer:" : "Always:"))
        for rule in ruleSet.always(language) { print("    • \(rule)") }
    }

    /// `35 ≤ x ≤ 50`, `x < 35`, `x > 100`.
    static func range(_ band: Band, _ language: Language) -> String {
        func n(_ value: Double) -> String {
            value == value.rounded() ? String(Int(value)) : Terminal.number(value, language, digits: 2)
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
