import AmpelCore
import AmpelData
import AmpelDomain
import ArgumentParser
import Foundation

/// `ampel check`: the signal for one district, or for a position.
struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the traffic-light signal for a district (--district AGS) or a position (--lat, --lon).")

    @Option(name: .long, help: "The district's five-digit code (AGS/RS), e.g. 09162 for SK München.")
    var district: String?

    @OptionGroup var data: DataOptions
    @OptionGroup var ruleSetOptions: RuleSetOptions
    @OptionGroup var languageOptions: LanguageOptions
    @Flag(name: .long, help: "Print the signal object as JSON.") var json = false
    @Flag(name: .long, help: "No ANSI colours.") var noColor = false

    func validate() throws {
        guard let district else { throw ValidationError("give --district AGS") }
        guard District.isValidCode(district) else {
            throw ValidationError("--district must be a five-digit code such as 09162, got '\(district)'")
        }
    }

    func run() throws {
        let ruleSet = try ruleSetOptions.load()
        let language = languageOptions.language
        let dataset = try data.dataset()
        let code = district ?? ""
        guard let entry = dataset[code] else {
            throw CLIError("unknown district '\(code)': no such district in the data of \(dataset.date.iso) (\(dataset.source)); `ampel districts` lists the known ones")
        }
        let signal: Signal
        do {
            signal = try ruleSet.signal(for: entry, dataDate: dataset.date, language: language)
        } catch {
            throw CLIError("\(error)")
        }
        try output(signal, ruleSet: ruleSet, language: language)
    }

    func output(_ signal: Signal, ruleSet: RuleSet, language: Language) throws {
        if json {
            print(try AmpelJSON.string(signal))
        } else {
            print(Terminal(noColor: noColor).render(signal, ruleSet: ruleSet, language: language))
        }
    }
}
