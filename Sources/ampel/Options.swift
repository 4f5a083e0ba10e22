import AmpelData
import AmpelDomain
import AmpelGeo
import ArgumentParser
import Foundation
import Logging

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
    @Option(name: .long, help: "Rule set: a bundled name (bavaria, bavaria-initial, notbremse-2021, krankenhausampel-2021, hospitalisierung-2021) or the path of a JSON file.")
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

/// The live sources, for `fetch` and `--source` of `check` and `districts`.
enum LiveSource: String, ExpressibleByArgument, CaseIterable {
    /// The RKI's maintained dataset: its daily district CSV.
    case rki
    /// The RKI's former ArcGIS layer `RKI_Landkreisdaten` (closed since 2023), for mirrors.
    case arcgis

    func validate(url: String) throws {
        switch self {
        case .rki:
            guard RKIDatasetClient.isValidURL(url) else {
                throw ValidationError("--url must be an http(s):// URL or a file:// path of the RKI district file, got '\(url)'")
            }
        case .arcgis:
            guard DataHTTP.isValidURL(url) else {
                throw ValidationError("--url must be an http(s) URL such as http://127.0.0.1:8080/query, got '\(url)'")
            }
        }
    }

    /// The client for `url` (the source's default without one).
    func client(url: String?, timeout: Double, retry: RetryPolicy, region: Region) -> any IncidenceSource {
        let logger = cliLogger("ampel.data.\(rawValue)", level: .notice)
        switch self {
        case .rki:
            return RKIDatasetClient(
                configuration: .init(url: url ?? RKIDatasetClient.defaultURL, region: region,
                                     stallTimeout: .milliseconds(Int64(timeout * 1000)), retry: retry),
                logger: logger)
        case .arcgis:
            return ArcGISClient(
                configuration: .init(url: url ?? ArcGISClient.defaultURL, timeout: .milliseconds(Int64(timeout * 1000)), retry: retry,
                                     minimumDistricts: region.districtCount, region: region),
                logger: logger)
        }
    }
}

/// Which incidence data to use: `--source`, `--date`, `--url`, `--snapshot`, `--timeout`.
struct DataOptions: ParsableArguments {
    enum Source: String, ExpressibleByArgument, CaseIterable {
        /// Bundled snapshots and daily history together (the default).
        case bundled
        /// The bundled (or `--snapshot FILE`) RKI_Landkreisdaten snapshots.
        case snapshot
        /// The bundled RKI daily values.
        case history
        /// The RKI's maintained dataset, live (or `--url`).
        case rki
        /// The RKI's former ArcGIS layer (`--url` of a mirror).
        case arcgis

        var live: LiveSource? { LiveSource(rawValue: rawValue) }
    }

    @Option(name: .long, help: "Data source, the same as ampel run's: bundled (snapshots and daily history, the newer on each day), snapshot, history, rki (live: the RKI's maintained dataset), arcgis (a mirror of the former ArcGIS layer) (default: bundled; rki with --url, snapshot with --snapshot).")
    var source: Source?

    @Option(name: .long, help: "Publication day YYYY-MM-DD: the latest data published on or before it (default: the latest).")
    var date: String?

    @Option(name: .long, help: "For --source rki: the district file, http(s):// or file:// (default: the RKI's file on GitHub); for --source arcgis: the query endpoint.")
    var url: String?

    @Option(name: .customLong("hospitalisation-url"), help: "For a rule set of state indicators with --source rki: the RKI's hospitalisation file, http(s):// or file:// (default: the RKI's file on GitHub).")
    var hospitalisationURL: String?

    @Option(name: .customLong("icu-url"), help: "For a rule set of state indicators with --source rki: the DIVI register's state file, http(s):// or file:// (default: the RKI's file on GitHub).")
    var icuURL: String?

    @Option(name: .long, help: "A saved RKI answer (f=json) for --source snapshot, instead of the bundled days.")
    var snapshot: String?

    @Option(name: .long, help: "Seconds one request to the RKI service may take (--source rki).")
    var timeout: Double = 30

    @Option(name: .customLong("state-dir"), help: "For --source rki and arcgis: the state directory whose cached last good data answers when the service fails, the same as ampel run's (default: $AMPEL_STATE_DIR, else $STATE_DIRECTORY, $XDG_STATE_HOME/ampel or ~/.local/state/ampel).")
    var stateDir: String?

    /// The data a command answers from: the source's, or the cached last good data when the
    /// live service failed (then `stale`, with the failure and the time it was cached).
    struct Loaded {
        var dataset: Dataset
        /// The RKI service failed and the data comes from the cache in the state directory.
        var stale = false
        /// Why the service could not answer (set when `stale`).
        var failure: String?
        /// When the cached data was written (set when `stale`).
        var cachedAt: Date?
        /// The days before ``dataset`` the live file carried.
        var earlier: [Dataset] = []

        /// One line for a person: what failed and what answers instead; `nil` when not stale.
        func staleNote(_ language: Language) -> String? {
            guard stale else { return nil }
            let at = cachedAt.map { ISO8601DateFormatter().string(from: $0) } ?? "?"
            return language == .de
                ? "Veraltet: der RKI-Dienst ist nicht erreichbar (\(failure ?? "?")); es antworten die zuletzt gültigen Daten aus dem Zwischenspeicher (gespeichert \(at))"
                : "Stale: the RKI service failed (\(failure ?? "?")); answering from the cached last good data (saved \(at))"
        }
    }

    /// The source in effect: `--source`, else `rki` with `--url`, `snapshot` with `--snapshot`, else `bundled`.
    var effectiveSource: Source {
        source ?? (url != nil || hospitalisationURL != nil || icuURL != nil ? .rki : snapshot != nil ? .snapshot : .bundled)
    }

    func validate() throws {
        _ = try day()
        if let url {
            guard let live = effectiveSource.live else { throw ValidationError("--url needs --source rki or arcgis") }
            try live.validate(url: url)
        }
        for (flag, value) in [("--hospitalisation-url", hospitalisationURL), ("--icu-url", icuURL)] {
            guard let value else { continue }
            guard effectiveSource == .rki else { throw ValidationError("\(flag) needs --source rki") }
            guard RKIIndicatorClient.isValidURL(value) else {
                throw ValidationError("\(flag) must be an http(s):// URL or a file:// path, got '\(value)'")
            }
        }
        if snapshot != nil, effectiveSource != .snapshot {
            throw ValidationError("--snapshot FILE needs --source snapshot")
        }
        if effectiveSource.live != nil, date != nil {
            throw ValidationError("--date does not apply to a live source: it answers its newest day")
        }
        if effectiveSource == .snapshot, snapshot != nil, date != nil {
            throw ValidationError("--date does not apply to a --snapshot file: it holds one publication")
        }
        guard timeout.isFinite, timeout > 0 else {
            throw ValidationError("--timeout must be a positive number of seconds, got \(timeout)")
        }
    }

    func day() throws -> Day? {
        guard let date else { return nil }
        guard let day = Day(iso: date) else {
            throw ValidationError("--date must be a day as YYYY-MM-DD, got '\(date)'")
        }
        return day
    }


    /// The state directory: `--state-dir`, else the one every command uses by default (``StateDirectory``).
    var stateDirectory: URL {
        stateDir.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? StateDirectory.resolve()
    }

    /// The data, with each district's trend and phase in force under `ruleSet` where a history
    /// is at hand: the bundled daily history, or the publications `fetch` and `run` keep in
    /// the state directory for `--source rki`.
    func dataset(ruleSet: RuleSet) async throws -> Loaded {
        if ruleSet.readsStateIndicators { return try await indicators(ruleSet: ruleSet) }
        var loaded = try await dataset(region: ruleSet.region)
        let current = loaded.dataset
        switch effectiveSource {
        case .bundled, .history:
            if current.source == "history" {
                loaded.dataset = try BundledData.shared.history(on: current.date, ruleSet: ruleSet)
            }
        case .rki, .arcgis:
            // Ampel's own history first, the file's past days where it has none, as `run` keeps them.
            let own = (try? PublicationHistory(directory: stateDirectory).load()) ?? []
            loaded.dataset = current.withCourses(window: PublicationHistory.merging(loaded.earlier, into: own).window,
                                                 ruleSet: ruleSet, region: ruleSet.region)
        case .snapshot:
            break
        }
        return loaded
    }

    func dataset(region: Region) async throws -> Loaded {
        let day = try self.day()
        do {
            switch effectiveSource {
            case .bundled: return Loaded(dataset: try BundledData.shared.dataset(on: day))
            case .snapshot:
                if let snapshot {
                    return Loaded(dataset: try SnapshotSource(file: URL(fileURLWithPath: snapshot)).load())
                }
                return Loaded(dataset: try BundledData.shared.snapshot(on: day))
            case .history: return Loaded(dataset: try BundledData.shared.history(on: day))
            case .rki, .arcgis:
                let live = effectiveSource.live!
                let retry = RetryPolicy(maxAttempts: 3, baseDelay: .seconds(1), maxDelay: .seconds(8))
                do {
                    let answer = try await live.client(url: url, timeout: timeout, retry: retry, region: region).check(ifChanged: nil)
                    guard case .publication(let publication) = answer else { throw DataError(.malformed, "304 Not Modified without validators") }
                    return Loaded(dataset: publication.newest, earlier: publication.earlier)
                } catch let failure as DataError {
                    return try cached(after: failure)
                }
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("\(error)")
        }
    }

    /// The data of a rule set of state indicators: the bundled hospital and intensive-care
    /// files at `--date`, or the RKI's live files; with the days before it for trend and phase
    /// in force.
    func indicators(ruleSet: RuleSet) async throws -> Loaded {
        let region = ruleSet.region
        do {
            try StateIndicators.checkProvided(ruleSet)
            switch effectiveSource {
            case .bundled:
                return Loaded(dataset: try BundledIndicatorSource(day: try day(), region: region).publication(ruleSet: ruleSet))
            case .rki:
                let client = RKIIndicatorClient(
                    configuration: .init(hospitalisationURL: hospitalisationURL ?? RKIIndicatorClient.defaultHospitalisationURL,
                                         icuURL: icuURL ?? RKIIndicatorClient.defaultICUURL, region: region,
                                         stallTimeout: .milliseconds(Int64(timeout * 1000)),
                                         retry: RetryPolicy(maxAttempts: 3, baseDelay: .seconds(1), maxDelay: .seconds(8))),
                    logger: cliLogger("ampel.data.rki-indicators", level: .notice))
                do {
                    guard case .publication(let publication) = try await client.check(ifChanged: nil) else {
                        throw DataError(.malformed, "304 Not Modified without validators")
                    }
                    let dataset = publication.newest
                    return Loaded(dataset: dataset.withCourses(window: publication.earlier + [dataset], ruleSet: ruleSet, region: region),
                                  earlier: publication.earlier)
                } catch let failure as DataError {
                    return try cached(after: failure, directory: StateIndicators.cacheDirectory(in: stateDirectory))
                }
            case .snapshot, .history, .arcgis:
                let what = ruleSet.readsStateIndicators ? "rule set '\(ruleSet.id)' reads" : "the states' table reads"
                throw CLIError("\(what) hospital and intensive-care indicators, which --source \(effectiveSource.rawValue) does not have: use --source bundled (the default) or rki")
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("\(error)")
        }
    }

    /// The cached last good data (what `ampel fetch` and `ampel run` keep in the state
    /// directory), after the live service failed with `failure`; the failure itself when
    /// there is none.
    func cached(after failure: DataError, directory: URL? = nil) throws -> Loaded {
        let cache = DatasetCache(directory: directory ?? stateDirectory)
        let entry: DatasetCache.Entry?
        do {
            entry = try cache.load()
        } catch {
            throw CLIError("\(failure.message) (the cached data cannot be used either: \(error.message))")
        }
        guard let entry else {
            throw CLIError("\(failure.message) (and no cached data in \(cache.directory.path): `ampel fetch` or `ampel run` keep it there)")
        }
        return Loaded(dataset: entry.dataset, stale: true, failure: failure.message, cachedAt: entry.savedAt)
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

/// A logger for the data layer that writes to standard error, so that standard output
/// holds only the command's answer (`--json` stays parseable).
func cliLogger(_ label: String, level: Logger.Level) -> Logger {
    var logger = Logger(label: label, factory: { StreamLogHandler.standardError(label: $0) })
    logger.logLevel = level
    return logger
}
