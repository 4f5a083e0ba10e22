import AmpelCore
import Foundation

/// The rules of one phase: its bounds, colour and texts.
public struct PhaseRules: Sendable, Hashable {
    public let id: PhaseID
    public let color: RGB
    /// The incidence band of an incidence set; without bounds in a set of indicator
    /// conditions (``PhaseMeasure/conditions(_:)``).
    public let band: Band
    public let title: LocalizedText
    public let rules: LocalizedList
}

/// What a signal says for a position outside the monitored region.
public struct OutsideRules: Sendable, Hashable {
    public let color: RGB
    public let title: LocalizedText
    public let rules: LocalizedList
}

/// A validated set of phases with bounds, colours and texts in German and English.
///
/// Rule sets are data (JSON files, see `docs/rulesets.md`): the Bavarian set with DARK RED
/// differs from the initial one only in its file. Validation guarantees that every finite,
/// non-negative incidence falls into exactly one phase and that every text exists in every
/// declared language.
public struct RuleSet: Sendable, Hashable {
    public let id: String
    public let name: LocalizedText
    public let source: String?
    public let languages: [Language]
    public let phases: [PhaseRules]
    public let always: LocalizedList
    public let outside: OutsideRules
    /// How the data gives a phase: incidence bands, or conditions over ``indicators``.
    public let measure: PhaseMeasure
    /// The indicators the set reads, in the file's order: the district incidence alone for
    /// the incidence sets.
    public let indicators: [IndicatorDeclaration]
    /// How long a measured phase must last before it is in force; ``DayCounts/immediate`` unless the file says otherwise.
    public let dayCounts: DayCounts
    /// Where the rules apply: the districts whose topics, entities and map Ampel publishes;
    /// a position elsewhere is `outside`. Bavaria unless the file names another region.
    public let region: Region

    /// The rules of `phase`, if this set uses it.
    public func rules(for phase: PhaseID) -> PhaseRules? {
        phases.first { $0.id == phase }
    }

    /// The incidence bands, `nil` for a set of indicator conditions.
    public var classifier: Classifier? {
        if case .bands(let classifier) = measure { return classifier }
        return nil
    }

    /// The phase of a district incidence under an incidence set.
    ///
    /// - Throws: ``IncidenceError`` for NaN, infinite and negative values: never a colour.
    /// - Returns: `nil` for a set of indicator conditions, whose phase no incidence gives.
    public func classify(_ incidence: Double) throws(IncidenceError) -> PhaseRules? {
        guard let classifier else { return nil }
        let id = try classifier.classify(incidence)
        // Every classifier phase has rules: both are built from the same list.
        return phases.first { $0.id == id } ?? phases[phases.count - 1]
    }
}

/// Why a rule-set file was rejected.
public struct RuleSetError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The rule set's id or file name, as far as it is known.
    public let ruleSet: String
    public let message: String

    public init(ruleSet: String, message: String) {
        self.ruleSet = ruleSet
        self.message = message
    }

    public var description: String { "rule set '\(ruleSet)': \(message)" }
}

// MARK: - The file format

/// The JSON form of a rule set; see `docs/rulesets.md`.
struct RuleSetFile: Codable {
    struct BoundFile: Codable {
        var value: Double
        var inclusive: Bool
    }

    struct ConditionFile: Codable {
        var indicator: String
        var above: Double
        var from: Day?
    }

    struct IndicatorFile: Codable {
        var name: IndicatorName
        var level: IndicatorLevel
        var title: [String: String]
        var text: [String: String]
    }

    struct PhaseFile: Codable {
        var id: String
        var color: String
        var lower: BoundFile?
        var upper: BoundFile?
        var when: [ConditionFile]?
        var title: [String: String]
        var rules: [String: [String]]
    }

    struct OutsideFile: Codable {
        var color: String
        var title: [String: String]
        var rules: [String: [String]]
    }

    var id: String
    var name: [String: String]
    var source: String?
    var languages: [String]
    var indicators: [IndicatorFile]?
    var phases: [PhaseFile]
    var always: [String: [String]]
    var outside: OutsideFile
    var enterAfterDays: Int?
    var leaveAfterDays: Int?
    var delayDays: Int?
    var workingDaysOnly: Bool?
    var holidays: [Day]?
    var region: RegionFile?
}

/// `"region": "germany"`, or `{"name": "Bayern", "prefixes": ["09"]}`.
enum RegionFile: Codable {
    case germany
    case prefixes(name: String, prefixes: [String])

    private enum Keys: String, CodingKey { case name, prefixes }

    init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let word = try? single.decode(String.self) {
            guard word == "germany" else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                        debugDescription: "region '\(word)' is unknown (\"germany\", or {\"name\", \"prefixes\"})"))
            }
            self = .germany
            return
        }
        let keyed = try decoder.container(keyedBy: Keys.self)
        self = .prefixes(name: try keyed.decode(String.self, forKey: .name), prefixes: try keyed.decode([String].self, forKey: .prefixes))
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .germany:
            var single = encoder.singleValueContainer()
            try single.encode("germany")
        case .prefixes(let name, let prefixes):
            var keyed = encoder.container(keyedBy: Keys.self)
            try keyed.encode(name, forKey: .name)
            try keyed.encode(prefixes, forKey: .prefixes)
        }
    }
}

extension RuleSet {
    /// Decodes and validates a rule set from its JSON form.
    ///
    /// - Parameter name: what to call the set in errors before its id is known (a file name).
    public static func decode(_ data: Data, name: String) throws(RuleSetError) -> RuleSet {
        let file: RuleSetFile
        do {
            file = try JSONDecoder().decode(RuleSetFile.self, from: data)
        } catch let error as DecodingError {
            throw RuleSetError(ruleSet: name, message: "not a valid rule-set file: \(describe(error))")
        } catch {
            throw RuleSetError(ruleSet: name, message: "not a valid rule-set file: \(error)")
        }
        return try validate(file)
    }

    static func validate(_ file: RuleSetFile) throws(RuleSetError) -> RuleSet {
        let setID = file.id
        func fail(_ message: String) -> RuleSetError { RuleSetError(ruleSet: setID, message: message) }

        guard !setID.isEmpty else { throw fail("empty id") }
        var languages: [Language] = []
        for code in file.languages {
            guard let language = Language(rawValue: code) else {
                throw fail("unknown language '\(code)' in languages (known: de, en)")
            }
            if !languages.contains(language) { languages.append(language) }
        }
        guard !languages.isEmpty else { throw fail("no languages declared") }
        let read = RuleSetTexts(languages: languages, fail: fail)

        var phases: [PhaseRules] = []
        for phase in file.phases {
            guard let id = PhaseID(phase.id) else {
                throw fail("unknown phase id '\(phase.id)' (known: green, yellow, red, darkred)")
            }
            let band = Band(
                phase: id,
                lower: phase.lower.map { Bound($0.value, inclusive: $0.inclusive) },
                upper: phase.upper.map { Bound($0.value, inclusive: $0.inclusive) }
            )
            phases.append(PhaseRules(
                id: id,
                color: try read.color(phase.color, "phase \(phase.id)"),
                band: band,
                title: try read.text(phase.title, "phase \(phase.id) title"),
                rules: try read.list(phase.rules, "phase \(phase.id) rules")
            ))
        }
        let indicators: [IndicatorDeclaration]
        let measure: PhaseMeasure
        if let declared = file.indicators {
            indicators = try declared.map { (entry) throws(RuleSetError) -> IndicatorDeclaration in
                IndicatorDeclaration(key: IndicatorKey(entry.name, entry.level),
                                     title: try read.text(entry.title, "indicator \(entry.name) title"),
                                     text: try read.text(entry.text, "indicator \(entry.name) text"))
            }
            measure = try conditions(file.phases, phases: phases, indicators: indicators, fail: fail)
        } else {
            if let phase = file.phases.first(where: { $0.when != nil }) {
                throw fail("phase \(phase.id): \"when\" needs the indicators it names declared in \"indicators\"")
            }
            indicators = [.districtIncidence]
            do {
                measure = .bands(try Classifier(bands: phases.map(\.band)))
            } catch {
                throw fail(describe(error))
            }
        }
        return RuleSet(
            id: setID,
            name: try read.text(file.name, "name"),
            source: file.source,
            languages: languages,
            phases: phases,
            always: try read.list(file.always, "always"),
            outside: OutsideRules(
                color: try read.color(file.outside.color, "outside"),
                title: try read.text(file.outside.title, "outside title"),
                rules: try read.list(file.outside.rules, "outside rules", allowEmpty: true)
            ),
            measure: measure,
            indicators: indicators,
            dayCounts: try readDayCounts(file, fail: fail),
            region: try readRegion(file.region, fail: fail)
        )
    }

    /// The day counts of a file: at least one day to enter and to leave, no negative delay,
    /// holidays only with working days.
    static func readDayCounts(_ file: RuleSetFile, fail: (String) -> RuleSetError) throws(RuleSetError) -> DayCounts {
        let enter = file.enterAfterDays ?? 1
        let leave = file.leaveAfterDays ?? 1
        let delay = file.delayDays ?? 0
        guard enter >= 1 else { throw fail("enterAfterDays must be at least 1, got \(enter)") }
        guard leave >= 1 else { throw fail("leaveAfterDays must be at least 1, got \(leave)") }
        guard delay >= 0 else { throw fail("delayDays must not be negative, got \(delay)") }
        if file.holidays?.isEmpty == false, file.workingDaysOnly != true {
            throw fail("holidays only apply with workingDaysOnly: true")
        }
        return DayCounts(enterAfterDays: enter, leaveAfterDays: leave, delayDays: delay,
                         workingDaysOnly: file.workingDaysOnly ?? false, holidays: Set(file.holidays ?? []))
    }

    /// The region a file names: Bavaria without one, all of Germany, or district-code prefixes
    /// that match at least one German district.
    static func readRegion(_ declared: RegionFile?, fail: (String) -> RuleSetError) throws(RuleSetError) -> Region {
        switch declared {
        case nil: return .bavaria
        case .germany: return .germany
        case .prefixes(let name, let prefixes):
            guard !prefixes.isEmpty else { throw fail("region \(name): no prefixes (all of Germany is \"region\": \"germany\")") }
            for prefix in prefixes where !(1...5).contains(prefix.utf8.count) || !prefix.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
                throw fail("region \(name): prefix '\(prefix)' is not 1 to 5 digits of a district code")
            }
            let region = Region(prefixes: prefixes, name: name)
            guard region.districtCount > 0 else { throw fail("region \(name): no German district has a code starting with \(prefixes.joined(separator: ", "))") }
            return region
        }
    }
}

/// A rule-set file's texts, lists and colours, read in its declared languages: every declared
/// language present and not empty, no unknown one, lists of one length in every language.
struct RuleSetTexts {
    let languages: [Language]
    let fail: (String) -> RuleSetError

    func text(_ raw: [String: String], _ what: String) throws(RuleSetError) -> LocalizedText {
        var values: [Language: String] = [:]
        for (code, value) in raw {
            guard let language = Language(rawValue: code) else { throw fail("\(what): unknown language '\(code)'") }
            values[language] = value
        }
        for language in languages where (values[language] ?? "").trimmingCharacters(in: .whitespaces).isEmpty {
            throw fail("\(what): no text in declared language '\(language.rawValue)'")
        }
        return LocalizedText(values)
    }

    func list(_ raw: [String: [String]], _ what: String, allowEmpty: Bool = false) throws(RuleSetError) -> LocalizedList {
        var values: [Language: [String]] = [:]
        for (code, value) in raw {
            guard let language = Language(rawValue: code) else { throw fail("\(what): unknown language '\(code)'") }
            values[language] = value
        }
        for language in languages {
            guard let entries = values[language], allowEmpty || !entries.isEmpty else {
                throw fail("\(what): no text in declared language '\(language.rawValue)'")
            }
            if entries.contains(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty }) {
                throw fail("\(what): an empty text in '\(language.rawValue)'")
            }
        }
        let counts = Set(languages.map { values[$0]?.count ?? 0 })
        if counts.count > 1 { throw fail("\(what): the languages have different numbers of entries") }
        return LocalizedList(values)
    }

    func color(_ raw: String, _ what: String) throws(RuleSetError) -> RGB {
        guard let rgb = RGB(hex: raw) else { throw fail("\(what): bad colour '\(raw)' (expected #RRGGBB)") }
        return rgb
    }
}

extension RuleSet {
    /// The conditions of a set that declares indicators: the first phase has none, every
    /// other phase at least one, each naming a declared indicator with a finite bound.
    static func conditions(_ files: [RuleSetFile.PhaseFile], phases: [PhaseRules], indicators: [IndicatorDeclaration],
                           fail: (String) -> RuleSetError) throws(RuleSetError) -> PhaseMeasure {
        guard !indicators.isEmpty else { throw fail("\"indicators\" is empty") }
        // Conditions name an indicator by name alone: one level per name.
        var seen: Set<IndicatorName> = []
        for indicator in indicators where !seen.insert(indicator.key.name).inserted {
            throw fail("indicator \(indicator.key.name) is declared twice")
        }
        if indicators.contains(where: { $0.key.level == .district }) {
            throw fail("indicators: a set of conditions reads state indicators only (the district incidence has its bands: a set without \"indicators\")")
        }
        guard !files.isEmpty else { throw fail("no phases") }
        var result: [(phase: PhaseID, conditions: [IndicatorCondition])] = []
        for (index, file) in files.enumerated() {
            let phase = phases[index].id
            if file.lower != nil || file.upper != nil {
                throw fail("phase \(file.id): a set with indicators gives phases by \"when\", not by \"lower\"/\"upper\"")
            }
            if result.contains(where: { $0.phase == phase }) { throw fail("phase \(file.id) appears twice") }
            if let previous = result.last?.phase, previous >= phase {
                throw fail("phase \(file.id) must come before \(previous.id): phases go from the mildest to the strictest")
            }
            let conditions = file.when ?? []
            if index == 0, !conditions.isEmpty {
                throw fail("phase \(file.id): the first phase holds when no other does and takes no \"when\"")
            }
            if index > 0, conditions.isEmpty { throw fail("phase \(file.id): no conditions in \"when\"") }
            var parsed: [IndicatorCondition] = []
            for condition in conditions {
                guard let declared = indicators.first(where: { $0.key.name.rawValue == condition.indicator }) else {
                    throw fail("phase \(file.id): indicator '\(condition.indicator)' is not declared in \"indicators\"")
                }
                guard condition.above.isFinite, condition.above >= 0 else {
                    throw fail("phase \(file.id): the bound of \(condition.indicator) is not a finite, non-negative number")
                }
                parsed.append(IndicatorCondition(indicator: declared.key, above: condition.above, from: condition.from))
            }
            result.append((phase, parsed))
        }
        return .conditions(result)
    }
}

func describe(_ error: BandsError) -> String {
    switch error {
    case .empty: "no phases"
    case .firstBandNotFromZero(let id): "phase \(id.id): the first phase must start at 0 (inclusive) or have no lower bound"
    case .lastBandBounded(let id): "phase \(id.id): the last phase must have no upper bound"
    case .invalidBound(let id): "phase \(id.id): a bound is NaN, infinite or negative"
    case .emptyBand(let id): "phase \(id.id): its lower bound is not below its upper bound"
    case .duplicatePhase(let id): "phase \(id.id) appears twice"
    case .gap(let below, let above): "bounds leave a gap between \(below.id) and \(above.id)"
    case .overlap(let below, let above): "bounds of \(below.id) and \(above.id) overlap"
    case .openInnerBound(let id): "phase \(id.id): a phase between others needs both bounds"
    }
}

func describe(_ error: DecodingError) -> String {
    func path(_ context: DecodingError.Context) -> String {
        let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        return keys.isEmpty ? "" : " at \(keys.hasPrefix(".") ? String(keys.dropFirst()) : keys)"
    }
    switch error {
    case .keyNotFound(let key, let context): return "missing key '\(key.stringValue)'\(path(context))"
    case .typeMismatch(_, let context): return "wrong type\(path(context)): \(context.debugDescription)"
    case .valueNotFound(_, let context): return "missing value\(path(context))"
    case .dataCorrupted(let context): return "\(context.debugDescription)\(path(context))"
    @unknown default: return "\(error)"
    }
}

extension IncidenceError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .notANumber: "the incidence is not a number"
        case .infinite: "the incidence is infinite"
        case .negative: "the incidence is negative"
        }
    }
}
