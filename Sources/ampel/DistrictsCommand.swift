import AmpelCore
import AmpelDomain
import ArgumentParser
import Foundation

/// `ampel districts`: the monitored region's districts with incidence and phase.
struct Districts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the 96 Bavarian districts with incidence and phase.")

    enum Sort: String, ExpressibleByArgument, CaseIterable { case incidence, name }

    @OptionGroup var data: DataOptions
    @OptionGroup var ruleSetOptions: RuleSetOptions
    @OptionGroup var languageOptions: LanguageOptions
    @Option(name: .long, help: "Order: incidence (highest first) or name.") var sort: Sort = .incidence
    @Flag(name: .long, help: "Print a JSON array instead of a table.") var json = false
    @OptionGroup var colorOptions: ColorOptions

    struct Row: Encodable {
        let ags: String
        let name: String
        let state: String
        let incidence: Double
        let phase: String
        let color: String
        let dataDate: String
        /// The RKI service failed: the row comes from the cached last good data.
        let stale: Bool
    }

    func run() async throws {
        let ruleSet = try ruleSetOptions.load()
        let loaded = try await data.dataset()
        let dataset = loaded.dataset
        let staleNote = loaded.staleNote(languageOptions.language)
        if let staleNote { FileHandle.standardError.write(Data("Warning: \(staleNote)\n".utf8)) }
        let language = languageOptions.language
        var rows: [(Row, PhaseRules)] = []
        for entry in dataset.districts(in: .bavaria) {
            let phase: PhaseRules
            do { phase = try ruleSet.classify(entry.incidence) } catch {
                throw CLIError("district \(entry.district.ags): \(error)")
            }
            rows.append((Row(ags: entry.district.ags, name: entry.district.name, state: entry.district.state,
                             incidence: entry.incidence, phase: phase.id.id, color: phase.color.hex,
                             dataDate: dataset.date.iso, stale: loaded.stale), phase))
        }
        switch sort {
        case .incidence: rows.sort { ($0.0.incidence, $1.0.name) > ($1.0.incidence, $0.0.name) }
        case .name: rows.sort { ($0.0.name.lowercased(), $0.0.ags) < ($1.0.name.lowercased(), $1.0.ags) }
        }
        if json {
            print(try AmpelJSON.string(rows.map(\.0), pretty: true))
            return
        }
        let terminal = Terminal(colorOptions)
        let de = language == .de
        print(terminal.bold(de ? "Bayern, Datenstand \(dataset.date.iso)" : "Bavaria, data of \(dataset.date.iso)")
              + terminal.dim("  (\(rows.count) \(de ? "Landkreise und Städte" : "districts"), \(ruleSet.id))")
              + (loaded.stale ? terminal.bold(de ? "  VERALTET" : "  STALE") : ""))
        if let staleNote { print(terminal.bold(staleNote)) }
        let width = rows.map(\.0.name.count).max() ?? 20
        for (row, phase) in rows {
            let name = row.name.padding(toLength: width, withPad: " ", startingAt: 0)
            let incidence = Terminal.number(row.incidence, language)
            let padded = String(repeating: " ", count: max(0, 7 - incidence.count)) + incidence
            print("\(terminal.paint("●", phase.color, bold: true)) \(row.ags)  \(name)  \(padded)  \(terminal.paint(phase.title(language), phase.color))")
        }
        var counts: [String] = []
        for phase in ruleSet.phases {
            let count = rows.filter { $0.1.id == phase.id }.count
            counts.append("\(phase.id.id) \(count)")
        }
        print(terminal.dim(counts.joined(separator: " · ") + " · " + (de ? "Daten: RKI, dl-de/by-2-0" : "data: RKI, dl-de/by-2-0")))
    }
}
