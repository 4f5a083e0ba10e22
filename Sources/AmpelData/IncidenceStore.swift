import AmpelDomain
import Foundation
import Logging

/// Holds the dataset in force and decides whether an answer may replace it.
///
/// Start-up order (``start()``): the cache, else the bundled snapshot, then the live source
/// as soon as it answers (the first ``refresh()``, which ``Refresher`` runs at once). A
/// fixed source (``IncidenceSource/isLive`` false) is loaded directly and never replaced by
/// a cache or fallback.
///
/// ``refresh()`` asks the source once: an error keeps the data in force and is logged and
/// counted by reason; an answer older than the data in force is rejected as `outdated`; the
/// same publication day is `unchanged`; a newer one replaces the data, is written to the
/// cache and reports the districts whose phase changed.
public actor IncidenceStore {
    /// The source asked by ``refresh()``.
    public nonisolated let source: any IncidenceSource
    /// Where the last good dataset is kept; `nil` for none.
    public nonisolated let cache: DatasetCache?
    /// The rule set that decides which districts changed phase.
    public nonisolated let ruleSet: RuleSet
    /// The monitored region.
    public nonisolated let region: Region
    /// Data older than this (from its publication day, 00:00 in Germany) is stale.
    public nonisolated let maximumAge: Duration
    /// Where the last publications of a live source are kept; `nil` for none.
    public nonisolated let history: PublicationHistory?
    /// How many publications the trend and the day counts look at (``PublicationHistory/length``
    /// when there is a history file).
    public nonisolated let historyLength: Int
    /// When a new publication is held back as implausible.
    public nonisolated let releaseGuard: ReleaseGuard

    private let fallback: (@Sendable () throws(DataError) -> Dataset)?
    private let now: @Sendable () -> Date
    private let logger: Logger

    /// The dataset in force, with the courses of its districts over ``window``.
    public private(set) var dataset: Dataset?
    /// The last publications (at most ``historyLength``), oldest first, ending with the one in force.
    public private(set) var window: [Dataset] = []
    private var origin: StartOrigin?
    private var lastSuccess: Date?
    private var lastError: DataError?
    private var lastErrorAt: Date?
    private var failedSinceSuccess = false
    private var lastCheck: Date?
    /// What identifies the file in force, for conditional requests.
    private var validators: HTTPValidators?
    /// A publication held back by the ``releaseGuard``, and why.
    private var held: (publication: Publication, error: DataError)?
    /// Whether the data in force is the fallback, which any valid answer of the source replaces.
    private var holdsFallback = false
    /// Numbers the checks, so that a failed attempt reported late is not taken for the next check's.
    private var checkNumber = 0
    /// The number of the check under way, `nil` between checks.
    private var checkUnderWay: Int?
    /// The last failed attempt of the check under way (see ``DataStatus/retrying``).
    private var retrying: DataError?
    private var counters = DataCounters()

    /// - Parameters:
    ///   - source: the source asked by ``refresh()``.
    ///   - cache: where the last good dataset of a live source is kept; `nil` for none.
    ///   - ruleSet: decides which districts changed phase (default: `bavaria`).
    ///   - region: the districts that count (default: Bavaria).
    ///   - maximumAge: how old data may be before it is stale (default 48 hours).
    ///   - fallback: the data to start with when there is no cache (default: the latest
    ///     bundled snapshot); `nil` for none. It is only a stand-in: the first valid answer of
    ///     the source replaces it even when that answer is older.
    ///   - now: the wall clock, for ``DataStatus/lastSuccess`` and the cache's time stamp.
    public init(
        source: any IncidenceSource,
        cache: DatasetCache? = nil,
        ruleSet: RuleSet = RuleSetCatalog.standard(),
        region: Region = .bavaria,
        maximumAge: Duration = .seconds(48 * 3600),
        fallback: (@Sendable () throws(DataError) -> Dataset)? = { () throws(DataError) -> Dataset in try BundledData.shared.snapshot() },
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "ampel.data"),
        history: PublicationHistory? = nil,
        historyLength: Int = PublicationHistory.defaultLength,
        releaseGuard: ReleaseGuard = .standard
    ) {
        self.releaseGuard = releaseGuard
        self.source = source
        self.cache = cache
        self.history = history
        self.historyLength = history?.length ?? max(1, historyLength)
        self.ruleSet = ruleSet
        self.region = region
        self.maximumAge = maximumAge
        self.fallback = fallback
        self.now = now
        self.logger = logger
    }

    /// Loads the data to start with, without the network; calling it again does nothing.
    ///
    /// A live source starts from the cache, else from `fallback`; an unreadable cache is
    /// logged, counted and moved aside (`incidence.json.corrupt-<UTC time>`). A fixed source
    /// is loaded directly; if that fails there is no data and ``status(now:)`` says why.
    @discardableResult
    public func start() async -> StartOrigin {
        if let origin { return origin }
        let chosen: StartOrigin
        if source.isLive {
            chosen = startLive()
        } else {
            do {
                let loaded = try await source.fetch()
                // The whole past the source knows: the walk then starts where `--source history` starts it.
                take(loaded, keep: false, earlier: source.earlier(than: loaded.date, count: .max))
                lastSuccess = now()
                chosen = .source
            } catch {
                record(error, what: "cannot load \(source.name)")
                chosen = .none
            }
        }
        origin = chosen
        if let dataset {
            logger.info("incidence data in force", metadata: [
                "origin": "\(chosen.rawValue)", "date": "\(dataset.date)", "source": "\(dataset.source)",
            ])
        }
        return chosen
    }

    private func startLive() -> StartOrigin {
        loadHistory()
        if let cache {
            do {
                if let entry = try cache.load() {
                    take(entry.dataset, keep: false)
                    validators = entry.validators
                    return .cache
                }
            } catch {
                setAside(error, moved: "the cache file could not be read and was moved aside; starting from the next source",
                         kept: "ignoring the unreadable cache") { () throws(DataError) in try cache.moveAside(now: now()) }
            }
        }
        guard let fallback else { return .none }
        do {
            // A stand-in: its courses use the history, but it does not join it.
            let stand = try fallback()
            dataset = stand.withCourses(window: window, ruleSet: ruleSet, region: region)
            holdsFallback = true
            return .bundled
        } catch {
            logger.error("no fallback data", metadata: ["reason": "\(error.reason)", "error": "\(error.message)"])
            return .none
        }
    }

    /// Asks the source once and applies its answer; see the type's description.
    ///
    /// - Parameter attemptFailed: called once the store has noted a failed attempt that will
    ///   be retried (``DataStatus/retrying``), so that the caller can show it at once.
    public func refresh(attemptFailed: (@Sendable (DataError) -> Void)? = nil) async -> RefreshOutcome {
        let answer: SourceAnswer
        // A held publication is asked about with its own validators: a `304` then says the
        // file still shows it. Without data of its own (a stand-in), the store asks for the whole file.
        let asked = held?.publication.validators ?? (holdsFallback || dataset == nil ? nil : validators)
        checkNumber += 1
        let number = checkNumber
        checkUnderWay = number
        defer { retrying = nil; checkUnderWay = nil }
        do {
            // The source's retries report here while this check waits (an actor lets other
            // calls in while it is suspended).
            let report: @Sendable (DataError) -> Void = { error in
                Task {
                    guard await self.noteFailedAttempt(error, check: number) else { return }
                    attemptFailed?(error)
                }
            }
            answer = try await source.check(ifChanged: asked, attemptFailed: report)
        } catch {
            // A check cut short by shutting down says nothing about the source: not counted.
            if Task.isCancelled { return .rejected(error) }
            counters.checks += 1
            lastCheck = now()
            record(error, what: Self.failureWords(error, source: source.name))
            return .rejected(error)
        }
        counters.checks += 1
        lastCheck = now()
        switch answer {
        case .notModified:
            counters.notModified += 1
            if let held {
                logger.notice("the held publication is still the newest: applying it", metadata: ["date": "\(held.publication.newest.date)"])
                return apply(held.publication)
            }
            succeeded()
            logger.debug("incidence data not modified", metadata: ["date": "\(dataset.map(\.date.iso) ?? "none")"])
            return .unchanged
        case .publication(let publication):
            counters.skippedRows += publication.skippedRows
            if let held, held.publication.newest == publication.newest {
                logger.notice("the held publication is still the newest: applying it", metadata: ["date": "\(publication.newest.date)"])
                return apply(publication)
            }
            if let previous = dataset, !holdsFallback, publication.newest.date < previous.date {
                let error = DataError(.outdated, "\(source.name) answered the publication of \(publication.newest.date), older than the \(previous.date) in force")
                record(error, what: "rejected the answer of \(source.name)")
                return .rejected(error)
            }
            if let before = dayBefore(publication), let why = releaseGuard.verdict(newest: publication.newest, before: before, region: region) {
                let error = DataError(.implausible, why)
                held = (publication, error)
                counters.held += 1
                succeeded()
                lastError = error
                lastErrorAt = now()
                logger.warning("held back a new publication", metadata: ["reason": "\(error.reason)", "error": "\(error.message)",
                                                                          "inForce": "\(dataset.map(\.date.iso) ?? "none")"])
                return .held(error)
            }
            return apply(publication)
        }
    }

    /// The source answered well: the data in force is trusted again.
    private func succeeded() {
        lastSuccess = now()
        failedSinceSuccess = false
    }

    /// The day before `publication`'s newest, as Ampel first read it where it has it; `nil`
    /// when neither Ampel nor the file has that day (weeks apart, values say nothing of a release).
    private func dayBefore(_ publication: Publication) -> Dataset? {
        let wanted = Day(daysSinceEpoch: publication.newest.date.daysSinceEpoch - 1)
        return window.last { $0.date == wanted }
            ?? (holdsFallback ? nil : dataset.flatMap { $0.date == wanted ? $0 : nil })
            ?? publication.earlier.last { $0.date == wanted }
    }

    /// Puts `publication` in force: its newest day as first read, the days before it only
    /// where Ampel has none of its own (later revisions are counted, not applied).
    private func apply(_ publication: Publication) -> RefreshOutcome {
        held = nil
        succeeded()
        let previous = dataset
        let fresh = publication.newest
        let (merged, revised) = PublicationHistory.merging(publication.earlier, into: window)
        counters.revisions += revised
        // Revisions change nothing Ampel keeps: the history is written again only for days it gained.
        let gained = merged.count != window.count
        let sameDay = previous.map { $0.date == fresh.date } ?? false
        if sameDay, !holdsFallback, let previous, previous.districts == fresh.districts {
            validators = publication.validators ?? validators
            if gained {
                window = Array(merged.suffix(historyLength))
                saveHistory()
            }
            counters.unchanged += 1
            logger.debug("incidence data unchanged", metadata: ["date": "\(fresh.date)", "revisedEarlierValues": "\(revised)"])
            return .unchanged
        }
        if sameDay, !holdsFallback {
            counters.corrections += 1
            logger.notice("a corrected file for the day in force: applied", metadata: ["date": "\(fresh.date)"])
        }
        window = merged
        let current = take(fresh, keep: source.isLive)
        holdsFallback = false
        validators = publication.validators
        counters.updates += 1
        let changed = current.districtsWithChangedPhase(since: previous, ruleSet: ruleSet, region: region)
        logger.info("new incidence data", metadata: [
            "date": "\(fresh.date)", "previous": "\(previous.map(\.date.iso) ?? "none")",
            "districts": "\(fresh.districts.count)", "changedPhase": "\(changed.count)",
            "revisedEarlierValues": "\(revised)",
        ])
        if source.isLive, let cache {
            do {
                try cache.save(fresh, savedAt: now(), validators: validators)
            } catch {
                counters.cacheErrors += 1
                logger.error("cannot write the cache", metadata: ["reason": "\(error.reason)", "error": "\(error.message)"])
            }
        }
        return .updated(previous: previous, current: current, changedDistricts: changed)
    }

    /// Puts `fresh` in force with its courses over the window it joins; with `keep`, the
    /// window goes to the history file.
    /// - Returns: the dataset now in force (`fresh` with its courses).
    @discardableResult
    private func take(_ fresh: Dataset, keep: Bool, earlier: [Dataset]? = nil) -> Dataset {
        // The kept publications alone (what a restart reads back), or the whole past a fixed source knows.
        let walked = PublicationHistory.adding(fresh, to: earlier ?? window, length: earlier == nil ? historyLength : .max)
        let current = fresh.withCourses(window: walked, ruleSet: ruleSet, region: region)
        dataset = current
        window = Array(walked.suffix(historyLength))
        guard keep else { return current }
        saveHistory()
        return current
    }

    /// Writes ``window`` to the history file, if there is one.
    private func saveHistory() {
        guard let history else { return }
        do {
            try history.save(window, savedAt: now())
        } catch {
            counters.cacheErrors += 1
            logger.error("cannot write the history", metadata: ["reason": "\(error.reason)", "error": "\(error.message)"])
        }
    }

    /// Reads the history file into ``window``; an unreadable one is logged, counted and moved
    /// aside, and the history starts anew.
    private func loadHistory() {
        guard let history else { return }
        do {
            window = try history.load()
        } catch {
            setAside(error, moved: "the history file could not be read and was moved aside; trend and day counts start anew",
                     kept: "ignoring the unreadable history file") { () throws(DataError) in try history.moveAside(now: now()) }
        }
    }

    /// Counts an unreadable file of ours and moves it aside (`move` returns where to), so that
    /// it is seen and the next start does not trip over it; logs `moved`, or `kept` when it
    /// cannot be moved.
    private func setAside(_ error: DataError, moved: String, kept: String, move: () throws(DataError) -> String) {
        counters.cacheErrors += 1
        do {
            let movedTo = try move()
            logger.error("\(moved)", metadata: ["reason": "\(error.reason)", "error": "\(error.message)", "movedTo": "\(movedTo)"])
        } catch let moveError {
            logger.error("\(kept)", metadata: ["reason": "\(error.reason)", "error": "\(error.message)", "moveAside": "\(moveError.message)"])
        }
    }

    /// Notes a failed attempt of check `check` while it is still under way.
    /// - Returns: whether it was noted (the check had not ended yet).
    private func noteFailedAttempt(_ error: DataError, check: Int) -> Bool {
        guard check == checkUnderWay else { return false }
        retrying = error
        lastCheck = now()
        return true
    }

    /// What a failed check is, in the log's words: a source that was never reached did not
    /// give an answer to reject.
    static func failureWords(_ error: DataError, source: String) -> String {
        switch error.reason {
        case .network, .timeout: "could not reach \(source)"
        case .http: "\(source) answered with an error"
        default: "rejected the answer of \(source)"
        }
    }

    private func record(_ error: DataError, what: String) {
        counters.rejections[error.reason, default: 0] += 1
        lastError = error
        lastErrorAt = now()
        failedSinceSuccess = true
        logger.warning("\(what)", metadata: [
            "reason": "\(error.reason)", "error": "\(error.message)",
            "inForce": "\(inForceWords)",
        ])
    }

    /// The data in force, as a log line names it: a stand-in is no "last good data".
    private var inForceWords: String {
        guard let dataset else { return "none" }
        return holdsFallback ? "bundled data of \(dataset.date.iso), a stand-in until the source answers" : dataset.date.iso
    }

    /// Whether signals must call the data stale at `now`.
    ///
    /// True when there is no data, or for a live source when the data is older than
    /// ``maximumAge`` (counted from its publication day, 00:00 in Germany) or the source has
    /// failed since its last success. Data of a fixed source is what the user chose: it is
    /// never stale by age.
    public func isStale(now: Date) -> Bool {
        guard let dataset else { return true }
        guard source.isLive else { return false }
        return failedSinceSuccess || Self.age(of: dataset.date, at: now) > maximumAge
    }

    /// Everything at once, for the daemon's signals and status output.
    public func status(now: Date) -> DataStatus {
        DataStatus(dataset: dataset, stale: isStale(now: now), source: source.name, origin: origin,
                   lastSuccess: lastSuccess, lastError: lastError, lastErrorAt: lastErrorAt,
                   failedSinceSuccess: failedSinceSuccess, counters: counters, lastCheck: lastCheck, held: held?.error,
                   standIn: holdsFallback, retrying: retrying)
    }

    /// The counters so far.
    public var currentCounters: DataCounters { counters }

    /// ``status(now:)`` at the store's own wall clock.
    public func status() -> DataStatus {
        status(now: now())
    }

    /// How long ago `day` was published at `now`: a publication counts from 00:00 of its day
    /// in Germany (Europe/Berlin), as the RKI's `last_update` says.
    public nonisolated static func age(of day: Day, at now: Date) -> Duration {
        let seconds = now.timeIntervalSince(publicationInstant(of: day))
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }

    /// 00:00 of `day` in Germany.
    public nonisolated static func publicationInstant(of day: Day) -> Date {
        let utcMidnight = Date(timeIntervalSince1970: TimeInterval(day.daysSinceEpoch) * 86_400)
        let zone = TimeZone(identifier: "Europe/Berlin")
        // Midnight in Berlin is one or two hours before midnight UTC; the offset at the UTC
        // midnight is the one in force at the Berlin midnight except on a switch day's early hours.
        let offset = zone?.secondsFromGMT(for: utcMidnight) ?? 3600
        return utcMidnight.addingTimeInterval(-TimeInterval(offset))
    }
}
