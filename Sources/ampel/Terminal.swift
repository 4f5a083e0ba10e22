import AmpelCore
import AmpelDomain
import ArgumentParser
import Foundation

/// `--color auto|always|never` (and the older `--no-color`, the same as `never`).
///
/// `auto`, the default, colours only when standard output is a terminal, `NO_COLOR` is unset
/// or empty (https://no-color.org) and `TERM` is not `dumb`; `always` and `never` decide
/// regardless, so `--color always` colours a pipe (`| less -R`) even with `NO_COLOR` set.
struct ColorOptions: ParsableArguments {
    enum Choice: String, ExpressibleByArgument, CaseIterable {
        case auto, always, never
    }

    @Option(name: .long, help: "Colours: auto (only on a terminal, and not with NO_COLOR set), always or never.")
    var color: Choice = .auto

    @Flag(name: .customLong("no-color"), help: "No ANSI colours (the same as --color never).")
    var noColor = false

    func enabled(environment: [String: String] = ProcessInfo.processInfo.environment,
                 isTerminal: Bool = isatty(STDOUT_FILENO) == 1) -> Bool {
        if noColor { return false }
        switch color {
        case .always: return true
        case .never: return false
        case .auto:
            return isTerminal && (environment["NO_COLOR"] ?? "").isEmpty && environment["TERM"] != "dumb"
        }
    }
}

/// Draws signals for a person at a terminal: a traffic light in true colour, the phase, the rules.
///
/// Colour as ``ColorOptions`` decide: by default only on a terminal without `NO_COLOR`.
struct Terminal {
    var color: Bool

    init(color: Bool) {
        self.color = color
    }

    init(_ options: ColorOptions) {
        self.init(color: options.enabled())
    }

    func paint(_ text: String, _ rgb: RGB, bold: Bool = false) -> String {
        guard color else { return text }
        return "\u{1B}[\(bold ? "1;" : "")38;2;\(rgb.red);\(rgb.green);\(rgb.blue)m\(text)\u{1B}[0m"
    }

    func bold(_ text: String) -> String { color ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
    func dim(_ text: String) -> String { color ? "\u{1B}[2m\(text)\u{1B}[0m" : text }

    /// A number the way `language` writes it: `177,3` or `177.3`.
    static func number(_ value: Double, _ language: Language, digits: Int = 1) -> String {
        let text = String(format: "%.\(digits)f", value)
        return language == .de ? text.replacingOccurrences(of: ".", with: ",") : text
    }

    /// The traffic light: red on top, yellow, green; the lit lamp in the phase's colour.
    func light(_ signal: Signal, ruleSet: RuleSet) -> [String] {
        let off = RGB(red: 70, green: 70, blue: 70)
        func lamp(_ ids: [PhaseID]) -> String {
            guard let phase = signal.phaseID, ids.contains(phase),
                  let rgb = ruleSet.rules(for: phase)?.color else {
                return color ? paint("○", off) : "·"
            }
            return paint("●", rgb, bold: true)
        }
        return ["╭───╮", "│ \(lamp([.red, .darkred])) │", "│ \(lamp([.yellow])) │", "│ \(lamp([.green])) │", "╰───╯"]
    }

    /// The trend's change against a week before, with an arrow: `↗ +12.3 %`.
    static func change(_ trend: Trend, _ language: Language) -> String {
        let arrow = switch trend.direction {
        case .rising: "↗"
        case .falling: "↘"
        case .steady: "→"
        }
        let sign = trend.change7 > 0 ? "+" : ""
        return "\(arrow) \(sign)\(number(trend.change7, language)) %"
    }

    /// The 14 days as bars in their phases' colours on a colour terminal; as numbers otherwise
    /// (a pipe, `NO_COLOR`), where bars without colour would say less than the figures.
    func sparkline(_ trend: Trend, ruleSet: RuleSet, language: Language) -> String {
        let change = Self.change(trend, language)
        guard color else {
            return trend.series.map { Self.number($0, language) }.joined(separator: " ") + "  " + change
        }
        let bars = Array("▁▂▃▄▅▆▇█")
        let low = trend.series.min() ?? 0
        let high = trend.series.max() ?? 0
        let line = trend.series.map { value -> String in
            let level = high > low ? Int(((value - low) / (high - low) * Double(bars.count - 1)).rounded()) : bars.count / 2
            let rgb = (try? ruleSet.classify(value))?.color ?? .off
            return paint(String(bars[level]), rgb)
        }.joined()
        return line + "  " + Self.number(low, language) + "–" + Self.number(high, language) + "  " + bold(change)
    }

    /// The licence of the data a rule set reads: the maintained hospital and intensive-care
    /// datasets are CC BY 4.0, the incidence data of 2020/21 dl-de/by-2-0.
    static func licence(_ ruleSet: RuleSet) -> String {
        ruleSet.readsStateIndicators ? "CC BY 4.0" : "dl-de/by-2-0"
    }

    /// The full answer of `ampel check`.
    func render(_ signal: Signal, ruleSet: RuleSet, language: Language) -> String {
        let de = language == .de
        let rgb = RGB(hex: signal.color) ?? .off
        var header: [String] = []
        if let district = signal.district {
            header.append(bold("\(district.name)") + dim(" (\(district.ags), \(district.state))"))
        } else {
            header.append(bold(de ? "Kein deutscher Landkreis" : "No German district"))
        }
        let marker = signal.phase == "darkred" ? (de ? " (blinkt)" : " (blinking)") : ""
        header.append(paint(signal.title.uppercased(), rgb, bold: true) + marker)
        if let incidence = signal.incidence {
            header.append((de ? "7-Tage-Inzidenz: " : "7-day incidence: ") + bold(Terminal.number(incidence, language))
                + (de ? " je 100.000 Einwohner" : " per 100,000 residents"))
        }
        // Under a set of state indicators: each with its value and day, and why the phase is what it is.
        for reading in signal.indicators where reading.level == .state {
            let value = reading.value.value.map { NumberText.short($0, language) } ?? (de ? "kein Wert" : "no value")
            let day = reading.value.date.map { " (\($0.iso))" } ?? ""
            let text = ruleSet.declaration(of: reading.value.key).title(language) + ": " + (reading.decisive ? bold(value) : value) + day
            header.append(text)
        }
        if let reason = signal.reason, signal.indicators.contains(where: { $0.level == .state }) {
            header.append(reason)
        }
        if let since = signal.since {
            var line = (de ? "In Kraft seit " : "In force since ") + since
            if let measured = signal.measuredPhase, measured != signal.phase,
               let id = PhaseID(measured), let rules = ruleSet.rules(for: id) {
                line += de ? " · heute gemessen: " : " · measured today: "
                line += paint(rules.title(language), rules.color)
            }
            header.append(line)
        }
        if let trend = signal.trend {
            header.append((de ? "14 Tage: " : "14 days: ") + sparkline(trend, ruleSet: ruleSet, language: language))
        }
        header.append(dim((de ? "Datenstand " : "Data of ") + signal.dataDate + (signal.stale ? (de ? " (veraltet)" : " (stale)") : "")
            + " · " + (de ? "Regelwerk " : "rule set ") + signal.ruleSet))
        let light = self.light(signal, ruleSet: ruleSet)
        var lines: [String] = []
        for index in 0..<max(light.count, header.count) {
            let left = index < light.count ? light[index] : "     "
            let right = index < header.count ? header[index] : ""
            lines.append("  \(left)  \(right)")
        }
        lines.append("")
        if !signal.rules.isEmpty {
            lines.append(bold(de ? "Es gilt:" : "Rules:"))
            lines += signal.rules.map { "  • \($0)" }
        }
        lines.append(bold(de ? "Immer:" : "Always:"))
        lines += signal.always.map { "  • \($0)" }
        lines.append("")
        lines.append(dim((de ? "Daten: Robert Koch-Institut (RKI), " : "Data: Robert Koch-Institut (RKI), ") + Self.licence(ruleSet)))
        return lines.joined(separator: "\n")
    }
}

