import AmpelCore
import AmpelData
import AmpelDomain
import ArgumentParser
import Foundation
import Logging

/// `ampel fetch`: ask the RKI service now, validate, cache, and say what came back.
///
/// It runs exactly what the daemon runs on every refresh (``IncidenceStore/refresh()``
/// with the cache in the state directory), so a newer cache is never replaced by an older
/// answer, and a bad answer never reaches the cache.
struct Fetch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch the RKI data now, validate it, cache it and print a summary.",
        discussion: """
            Exit codes: 0 new or unchanged data (cached); 2 the service could not be reached \
            (HTTP error, timeout, network); 3 the answer was rejected (invalid, incomplete, \
            held back as a possible wrong release, \
            older than the cache); 4 the data is valid but the cache could not be written; \
            1 any other error; 64 a bad flag. The cache goes to the state directory that \
            `ampel run` uses by default too, so a fetch fills the daemon's cache.

            Example:
              sudo -u ampel ampel fetch --state-dir /var/lib/ampel
            """)

    /// The exit codes, documented in `docs/data.md`.
    enum Exit {
        static let unreachable: Int32 = 2
        static let rejected: Int32 = 3
        static let cacheFailed: Int32 = 4
    }

    @Option(name: .long, help: "Live source: rki (the RKI's maintained dataset, its daily district CSV) or arcgis (the RKI's former ArcGIS layer, for mirrors that still serve it).")
    var source: LiveSource = .rki

    @Option(name: .long, help: "The district file (http(s):// or file://; default: the RKI's file on GitHub), or the ArcGIS query endpoint with --source arcgis.")
    var url: String?

    @Option(name: .customLong("hospitalisation-url"), help: "For a rule set of state indicators: the RKI's hospitalisation file, http(s):// or file:// (default: the RKI's file on GitHub).")
    var hospitalisationURL: String?

    @Option(name: .customLong("icu-url"), help: "For a rule set of state indicators: the DIVI register's state file, http(s):// or file:// (default: the RKI's file on GitHub).")
    var icuURL: String?

    @Option(name: .long, help: "The state directory holding the cache, the same as ampel run's (default: $AMPEL_STATE_DIR, else $STATE_DIRECTORY, $XDG_STATE_HOME/ampel or ~/.local/state/ampel).")
    var stateDir: String?

    @Option(name: .long, help: "Seconds one request may take.")
    var timeout: Double = 30

    @Option(name: .long, help: "Retries of a failed request (with backoff).")
    var retries: Int = 3

    @OptionGroup var ruleSetOptions: RuleSetOptions
    @Flag(name: .long, help: "Print the summary as JSON.") var json = false

    func validate() throws {
        if let url { try source.validate(url: url) }
        for (flag, value) in [("--hospitalisation-url", hospitalisationURL), ("--icu-url", icuURL)] {
            if let value, !RKIIndicatorClient.isValidURL(value) {
                throw ValidationError("\(flag) must be an http(s):// URL or a file:// path, got '\(value)'")
            }
        }
        guard timeout.isFinite, timeout > 0 else {
            throw ValidationError("--timeout must be a positive number of seconds, got \(timeout)")
        }
        guard (0...10).contains(retries) else {
            throw ValidationError("--retries must be 0 to 10, got \(retries)")
        }
    }

    struct Summary: Encodable {
        let status: String
        let date: String?
        let source: String?
        let districts: Int?
        let region: String
        let regionDistricts: Int?
        let phases: [String: Int]?
        let changedDistricts: [String]?
        let cache: String
        let cacheError: String?
        let reason: String?
        let message: String?
    }

    func run() async throws {
        let ruleSet = try ruleSetOptions.load()
        let stateDirectory = stateDir.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? StateDirectory.resolve()
        let (directory, client) = try dataSource(for: ruleSet, stateDirectory: stateDirectory)
        let cache = DatasetCache(directory: directory)
        // The command prints rejections itself; the store's log adds only cache trouble.
        let store = IncidenceStore(source: client, cache: cache, ruleSet: ruleSet, region: ruleSet.region, fallback: nil,
                                   logger: cliLogger("ampel.data", level: .error), history: PublicationHistory(directory: directory))
        await store.start()
        let outcome = await store.refresh()
        let status = await store.status(now: Date())
        let region = ruleSet.region

        try refused(outcome, status: status, region: region, cache: cache)
        guard let dataset = status.dataset else {
            throw CLIError("no data after a successful fetch")
        }
        try report(outcome, dataset: dataset, ruleSet: ruleSet, cache: cache, cacheFailed: status.counters.cacheErrors > 0)
    }

    /// A set of state indicators reads the hospital and intensive-care files into the cache
    /// `ampel run` keeps for them; any other set the incidence file.
    func dataSource(for ruleSet: RuleSet, stateDirectory: URL) throws -> (directory: URL, client: any IncidenceSource) {
        let retry = RetryPolicy(maxAttempts: retries + 1, baseDelay: .seconds(1), maxDelay: .seconds(8))
        guard ruleSet.readsStateIndicators else {
            return (stateDirectory, source.client(url: url, timeout: timeout, retry: retry, region: ruleSet.region))
        }
        do {
            try StateIndicators.checkProvided(ruleSet)
        } catch {
            throw CLIError(error.message)
        }
        let client = RKIIndicatorClient(
            configuration: .init(hospitalisationURL: hospitalisationURL ?? RKIIndicatorClient.defaultHospitalisationURL,
                                 icuURL: icuURL ?? RKIIndicatorClient.defaultICUURL, region: ruleSet.region,
                                 stallTimeout: .milliseconds(Int64(timeout * 1000)), retry: retry),
            logger: cliLogger("ampel.data.rki-indicators", level: .notice))
        return (StateIndicators.cacheDirectory(in: stateDirectory), client)
    }

    /// A rejected or held publication: said, and the command's exit.
    func refused(_ outcome: RefreshOutcome, status: DataStatus, region: Region, cache: DatasetCache) throws {
        switch outcome {
        case .rejected(let error):
            let unreachable = [DataError.Reason.http, .timeout, .network].contains(error.reason)
            if json {
                print(try AmpelJSON.string(Summary(
                    status: "rejected", date: status.dataset?.date.iso, source: status.dataset?.source,
                    districts: nil, region: region.name, regionDistricts: nil, phases: nil, changedDistricts: nil,
                    cache: cache.fileURL.path, cacheError: nil, reason: error.reason.rawValue, message: error.message)))
            }
            let kept = status.dataset.map { " The cached data of \($0.date.iso) stays in force." } ?? ""
            printError("Error: \(unreachable ? "could not get the RKI data" : "the RKI answer was rejected") (\(error.reason)): \(error.message).\(kept)")
            throw ExitCode(unreachable ? Exit.unreachable : Exit.rejected)
        case .held(let error):
            // One run cannot see the file twice; the daemon applies it at its next check if it persists.
            if json {
                print(try AmpelJSON.string(Summary(
                    status: "held", date: status.dataset?.date.iso, source: status.dataset?.source,
                    districts: nil, region: region.name, regionDistricts: nil, phases: nil, changedDistricts: nil,
                    cache: cache.fileURL.path, cacheError: nil, reason: error.reason.rawValue, message: error.message)))
            }
            let kept = status.dataset.map { " The cached data of \($0.date.iso) stays in force." } ?? ""
            printError("Error: the new publication looks like a wrong release and was not cached (\(error.reason)): \(error.message).\(kept) `ampel run` applies it when its next check still shows it.")
            throw ExitCode(Exit.rejected)
        case .updated, .unchanged:
            break
        }
    }

    /// What was fetched: the day, the districts, the phases, the cache; its exit when the cache failed.
    func report(_ outcome: RefreshOutcome, dataset: Dataset, ruleSet: RuleSet, cache: DatasetCache, cacheFailed: Bool) throws {
        let region = ruleSet.region
        var changed: [String]?
        if case .updated(_, _, let set) = outcome {
            changed = set.sorted()
        }
        let entries = dataset.districts(in: region)
        var phases: [String: Int] = [:]
        for phase in ruleSet.phases { phases[phase.id.id] = 0 }
        for entry in entries {
            let phase = try ruleSet.measure(entry, on: dataset.date).phase
            phases[phase.id.id, default: 0] += 1
        }
        let statusText = changed == nil ? "unchanged" : "updated"
        if json {
            print(try AmpelJSON.string(Summary(
                status: statusText, date: dataset.date.iso, source: dataset.source,
                districts: dataset.districts.count, region: region.name, regionDistricts: entries.count, phases: phases,
                changedDistricts: changed, cache: cache.fileURL.path,
                cacheError: cacheFailed ? "the cache could not be written (see the log)" : nil, reason: nil, message: nil)))
        } else {
            let news = changed.map { "new publication, \($0.count) districts changed phase" } ?? "unchanged, already cached"
            print("RKI data of \(dataset.date.iso): \(dataset.districts.count) districts, \(entries.count) in \(region.name) (\(news))")
            print(ruleSet.phases.map { "\($0.id.id) \(phases[$0.id.id] ?? 0)" }.joined(separator: " · "))
            print(cacheFailed ? "cache NOT written: \(cache.fileURL.path)" : "cache: \(cache.fileURL.path)")
        }
        if cacheFailed {
            printError("Error: the data is valid but the cache '\(cache.fileURL.path)' could not be written")
            throw ExitCode(Exit.cacheFailed)
        }
    }

    func printError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
