import AmpelCore
import AmpelData
import AmpelDomain
import ArgumentParser
import Foundation

/// `ampel states`: Germany and the 16 states with their hospital and intensive-care
/// indicators, and the phase a rule set of state indicators gives each.
struct States: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show Germany's and the states' hospital and intensive-care indicators, with the phase the rule set gives each state.",
        discussion: """
            Without a rule set of state indicators (krankenhausampel-2021, hospitalisierung-2021) the
            indicators are shown without a phase. --from and --to list every day between (bundled data;
            without the 14-day series). The hospitalisation values begin on 2023-01-02.
            Example:
              ampel states --rules hospitalisierung-2021 --date 2023-01-05
            """)

    @OptionGroup var data: DataOptions
    @OptionGroup var ruleSetOptions: RuleSetOptions
    @OptionGroup var languageOptions: LanguageOptions
    @Option(name: .long, help: "With --to: the first day of a series of days (bundled data only), YYYY-MM-DD.") var from: String?
    @Option(name: .long, help: "With --from: the last day of the series, YYYY-MM-DD.") var to: String?
    @Option(name: .long, help: "Only this state: 00 for Germany, 01 to 16.") var state: String?
    @Flag(name: .long, help: "Print a JSON array of state objects (docs/http.md, /api/states).") var json = false
    @OptionGroup var colorOptions: ColorOptions

    func validate() throws {
        if (from == nil) != (to == nil) { throw ValidationError("--from and --to go together") }
        if from != nil {
            guard data.date == nil else { throw ValidationError("give either --date or --from/--to") }
            guard data.effectiveSource == .bundled else { throw ValidationError("--from/--to read the bundled data: --source bundled") }
            guard let first = from.flatMap(Day.init(iso:)), let last = to.flatMap(Day.init(iso:)), first <= last else {
                throw ValidationError("--from and --to must be days YYYY-MM-DD, --from not after --to")
            }
        }
        if let state, GermanState.name(ofState: state) == nil {
            throw ValidationError("--state must be 00 (Germany) or 01 to 16, got '\(state)'")
        }
    }

    func run() async throws {
        let ruleSet = try ruleSetOptions.load()
        let language = languageOptions.language
        var reports: [StateReport] = []
        if let first = from.flatMap(Day.init(iso:)), let last = to.flatMap(Day.init(iso:)) {
            let indicators: StateIndicators
            do {
                indicators = try StateIndicators.bundled()
            } catch {
                throw CLIError("\(error)")
            }
            for number in first.daysSinceEpoch...last.daysSinceEpoch {
                guard let dataset = try? indicators.dataset(on: Day(daysSinceEpoch: number), region: ruleSet.region, source: "bundled"),
                      dataset.date.daysSinceEpoch == number else { continue }
                reports += selected(StateReport.all(dataset, ruleSet: ruleSet, language: language))
            }
        } else {
            // The rule set's own data when it reads state indicators; the same files beside an incidence set.
            let loaded = try await data.indicators(ruleSet: ruleSet)
            if let note = loaded.staleNote(language) { FileHandle.standardError.write(Data("Warning: \(note)\n".utf8)) }
            reports = selected(StateReport.all(loaded.dataset, ruleSet: ruleSet, language: language))
        }
        if json {
            var out = JSONWriter(capacity: 1_024 * max(reports.count, 1))
            out.raw("[")
            for (index, report) in reports.enumerated() {
                if index > 0 { out.raw(",") }
                out.raw(report.json(ruleSet: ruleSet))
            }
            out.raw("]")
            print(String(decoding: out.bytes, as: UTF8.self))
            return
        }
        print(table(reports, ruleSet: ruleSet, language: language))
    }

    func selected(_ reports: [StateReport]) -> [StateReport] {
        guard let state else { return reports }
        return reports.filter { $0.id == state }
    }

    func table(_ reports: [StateReport], ruleSet: RuleSet, language: Language) -> String {
        let terminal = Terminal(colorOptions)
        let keys = reports.first?.indicators.map(\.key) ?? []
        var lines: [String] = []
        let titles = keys.map { ruleSet.declaration(of: $0).title(language) }
        lines.append(terminal.dim("     " + "".padding(toLength: 24, withPad: " ", startingAt: 0)
                                  + titles.map { String($0.prefix(22)).padding(toLength: 24, withPad: " ", startingAt: 0) }.joined()))
        var day: Day?
        for report in reports {
            if report.dataDate != day {
                day = report.dataDate
                lines.append(terminal.bold(language == .de ? "Datenstand \(report.dataDate.iso)" : "Data of \(report.dataDate.iso)"))
            }
            let values = report.indicators.map { value in
                let text = value.value.map { NumberText.short($0, language) } ?? "–"
                return text.padding(toLength: 24, withPad: " ", startingAt: 0)
            }.joined()
            let dot = report.phase.map { terminal.paint("●", $0.color, bold: true) } ?? " "
            let phase = report.phase.map { terminal.paint($0.id.displayName(language), $0.color) } ?? ""
            lines.append("\(dot) \(report.id)  \(report.name.padding(toLength: 24, withPad: " ", startingAt: 0))\(values)\(phase)")
        }
        lines.append(terminal.dim(language == .de ? "Daten: Robert Koch-Institut, CC BY 4.0" : "data: Robert Koch-Institut, CC BY 4.0"))
        return lines.joined(separator: "\n")
    }
}
