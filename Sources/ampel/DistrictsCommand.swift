import AmpelCore
import AmpelDomain
import ArgumentParser
import Foundation

/// `ampel districts`: the monitored region's districts with incidence and phase.
struct Districts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the districts of the rule set's region (the 96 Bavarian ones by default) with incidence and phase.",
        discussion: """
            Example:
              ampel districts --date 2020-11-05 --sort trend
            """)

    enum Sort: String, ExpressibleByArgument, CaseIterable { case incidence, name, trend }

    @OptionGroup var data: DataOptions
    @OptionGroup var ruleSetOptions: RuleSetOptions
    @OptionGroup var languageOptions: LanguageOptions
    @Option(name: .long, help: "Order: incidence (highest first), name, or trend (fastest rising first).") var sort: Sort = .incidence
    @Flag(name: .long, help: "Print a JSON array instead of a table.") var json = false
    @OptionGroup var colorOptions: ColorOptions

    struct Row: Encodable {
        let ags: String
        let name: String
        let state: String
        let incidence: Double?
        /// Each indicator of the rule set with its value and whether it set the phase.
        let indicators: [IndicatorReading]
        let complete: Bool
        /// The phase in force.
        let phase: String
        let color: String
        let dataDate: String
        /// The RKI service failed: the row comes from the cached last good data.
        let stale: Bool
        let measuredPhase: String?
        let since: String?
        let trend: TrendRow?
        let reason: String?

        struct TrendRow: Encodable {
            let change7: Double
            let direction: String
            let series: [Double]
        }

        enum CodingKeys: String, CodingKey {
            case ags, name, state, incidence, indicators, complete, phase, color, dataDate, stale, measuredPhase, since, trend, reason
        }

        // Every key present, `null` where there is no value, as in the signal object.
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(ags, forKey: .ags)
            try c.encode(name, forKey: .name)
            try c.encode(state, forKey: .state)
            try c.encode(incidence, forKey: .incidence)
            try c.encode(indicators, forKey: .indicators)
            try c.encode(complete, forKey: .complete)
            try c.encode(reason, forKey: .reason)
            try c.encode(phase, forKey: .phase)
            try c.encode(color, forKey: .color)
            try c.encode(dataDate, forKey: .dataDate)
            try c.encode(stale, forKey: .stale)
            try c.encode(measuredPhase, forKey: .measuredPhase)
            try c.encode(since, forKey: .since)
            try c.encode(trend, forKey: .trend)
        }
    }

    func run() async throws {
        let ruleSet = try ruleSetOptions.load()
        let loaded = try await data.dataset(ruleSet: ruleSet)
        let dataset = loaded.dataset
        let staleNote = loaded.staleNote(languageOptions.language)
        if let staleNote { FileHandle.standardError.write(Data("Warning: \(staleNote)\n".utf8)) }
        let language = languageOptions.language
        var rows: [(Row, PhaseRules, Trend?)] = []
        for entry in dataset.districts(in: ruleSet.region) {
            // The signal's own path: phase in force, measured phase, since and trend as `check` gives them.
            let signal: Signal
            do {
                signal = try ruleSet.signal(for: entry, dataDate: dataset.date, language: language, stale: loaded.stale,
                                            course: dataset.courses[entry.district.ags])
            } catch {
                throw CLIError("\(error)")
            }
            guard let id = signal.phaseID, let phase = ruleSet.rules(for: id) else { continue }
            let trend = signal.trend.map { Row.TrendRow(change7: $0.change7, direction: $0.direction.rawValue, series: $0.series) }
            rows.append((Row(ags: entry.district.ags, name: entry.district.name, state: entry.district.state,
                             incidence: entry.incidence, indicators: signal.indicators, complete: signal.complete,
                             phase: phase.id.id, color: phase.color.hex,
                             dataDate: dataset.date.iso, stale: loaded.stale, measuredPhase: signal.measuredPhase,
                             since: signal.since, trend: trend, reason: signal.reason), phase, signal.trend))
        }
        switch sort {
        case .incidence:
            // A set of state indicators has no district incidence: its first indicator orders.
            func key(_ row: Row) -> Double { row.incidence ?? row.indicators.first?.value.value ?? -1 }
            rows.sort { (key($0.0), $1.0.name) > (key($1.0), $0.0.name) }
        case .name: rows.sort { ($0.0.name.lowercased(), $0.0.ags) < ($1.0.name.lowercased(), $1.0.ags) }
        case .trend:
            // Fastest rising first; districts without a trend last, by name.
            rows.sort { a, b in
                switch (a.0.trend?.change7, b.0.trend?.change7) {
                case let (x?, y?): return x != y ? x > y : a.0.name < b.0.name
                case (.some, nil): return true
                case (nil, .some): return false
                case (nil, nil): return a.0.name < b.0.name
                }
            }
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
        for (row, phase, trend) in rows {
            let name = row.name.padding(toLength: width, withPad: " ", startingAt: 0)
            // The incidence, or under a set of state indicators the value that decided.
            let value = row.incidence ?? row.indicators.first(where: \.decisive)?.value.value
            let incidence = value.map { Terminal.number($0, language) } ?? "–"
            let padded = String(repeating: " ", count: max(0, 7 - incidence.count)) + incidence
            let trend = trend.map { Terminal.change($0, language) } ?? "–"
            let trendColumn = trend.padding(toLength: 10, withPad: " ", startingAt: 0)
            print("\(terminal.paint("●", phase.color, bold: true)) \(row.ags)  \(name)  \(padded)  \(trendColumn)  \(terminal.paint(row.incidence == nil ? row.reason ?? phase.title(language) : phase.title(language), phase.color))")
        }
        var counts: [String] = []
        for phase in ruleSet.phases {
            let count = rows.filter { $0.1.id == phase.id }.count
            counts.append("\(phase.id.id) \(count)")
        }
        print(terminal.dim(counts.joined(separator: " · ") + " · " + (de ? "Daten: RKI, " : "data: RKI, ") + Terminal.licence(ruleSet)))
    }
}
