import AmpelData
import AmpelDomain
import AmpelGeo
import ArgumentParser
import Foundation

/// A failure the user can act on: printed as `Error: <message>`, exit code 1.
struct CLIError: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// `--lang de|en`; without it, `LC_ALL`/`LC_MESSAGES`/`LANG` decide; anything else means English.
struct LanguageOptions: ParsableArguments {
    @Option(name: .long, help: "Language of the texts: de or en (default: from LC_ALL/LANG; others fall back to en).")
    var lang: String?

    var language: Language {
        if let lang { return Language(requested: lang) }
        return Language(environment: ProcessInfo.processInfo.environment)
    }
}

/// `--rules NAME|PATH`: a bundled rule set or a JSON file.
struct RuleSetOptions: ParsableArguments {
    @Option(name: .long, help: "Rule set: a bundled name (bavaria, bavaria-initial) or the path of a JSON file.")
    var rules: String = RuleSetCatalog.defaultName

    func load() throws -> RuleSet {
        try RuleSetOptions.load(rules)
    }

    static func load(_ nameOrPath: String) throws -> RuleSet {
        if RuleSetCatalog.bundledNames.contains(nameOrPath) {
            return try RuleSetCatalog.bundled(nameOrPath)
        }
        let looksLikePath = nameOrPath.contains("/") || nameOrPath.hasSuffix(".json")
        guard looksLikePath || FileManager.default.fileExists(atPath: nameOrPath) else {
            throw CLIError("unknown rule set '\(nameOrPath)' (bundled: \(RuleSetCatalog.bundledNames.joined(separator: ", ")); or give the path of a JSON file)")
        }
        guard let data = FileManager.default.contents(atPath: nameOrPath) else {
            throw CLIError("cannot read rule-set file '\(nameOrPath)'")
        }
        do {
            return try RuleSet.decode(data, name: nameOrPath)
        } catch {
            throw CLIError("\(error)")
        }
    }
}

/// Which incidence data to use: `--source`, `--date`.
struct DataOptions: ParsableArguments {
    enum Source: String, ExpressibleByArgument, CaseIterable {
        /// Bundled snapshots and daily history together (the default).
        case bundled
        /// The bundled (or `--snapshot FILE`) RKI_Landkreisdaten snapshots.
        case snapshot
        /// The bundled RKI daily values.
        case history
    }

    @Option(name: .long, help: "Data source: bundled (snapshots and daily history), snapshot, history.")
    var source: Source = .bundled

    @Option(name: .long, help: "Publication day YYYY-MM-DD: the latest data published on or before it (default: the latest).")
    var date: String?

    func day() throws -> Day? {
        guard let date else { return nil }
        guard let day = Day(iso: date) else {
            throw ValidationError("--date must be a day as YYYY-MM-DD, got '\(date)'")
        }
        return day
    }

    func dataset() throws -> Dataset {
        let day = try self.day()
        do {
            switch source {
            case .bundled: return try BundledData.shared.dataset(on: day)
            case .snapshot: return try BundledData.shared.snapshot(on: day)
            case .history: return try BundledData.shared.history(on: day)
            }
        } catch {
            throw CLIError("\(error)")
        }
    }
}

/// The district geometry: bundled, or a user's GeoJSON file (`--geometry PATH`).
enum GeometryOptions {
    static func index(path: String?) throws -> DistrictIndex {
        do {
            guard let path else { return try DistrictIndex.bundled() }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError("cannot read geometry file '\(path)'")
            }
            return try DistrictIndex(geoJSON: data)
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("geometry: \(error)")
        }
    }
}
