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

    @Option(name: .long, help: "The monitored region as a code prefix (default 09: Bavaria); elsewhere the phase is 'outside'.")
    var region: String = Region.bavaria.prefix

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
        let region = Region(prefix: self.region, name: self.region == Region.bavaria.prefix ? Region.bavaria.name : self.region)
        if !region.contains(ags: code) {
            // A district outside the monitored region: named, but no phase of these rules.
            guard let known = dataset[code]?.district ?? (try? BundledData.shared.snapshot())?[code]?.district else {
                throw CLIError("unknown district '\(code)': no such district in the data of \(dataset.date.iso) (\(dataset.source)) or the bundled snapshots")
            }
            let ref = Signal.DistrictRef(ags: known.ags, name: known.name, state: known.state, type: known.kind.rawValue)
            try output(ruleSet.outsideSignal(district: ref, dataDate: dataset.date, language: language), ruleSet: ruleSet, language: language)
            return
        }
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
