import AmpelDomain
import Foundation

/// What one ``IncidenceStore/refresh()`` did.
public enum RefreshOutcome: Sendable, Hashable {
    /// A newer publication replaced the data in force.
    ///
    /// `changedDistricts` are the codes of the districts (in the store's region) whose
    /// phase differs between `previous` and `current`, plus districts in only one of them.
    case updated(previous: Dataset?, current: Dataset, changedDistricts: Set<String>)
    /// The source answered the publication already in force.
    case unchanged
    /// The answer was rejected; the data in force stays.
    case rejected(DataError)
    /// The answer looks like a wrong release (``ReleaseGuard``): kept aside, not applied; it
    /// is applied when the next check still shows it.
    case held(DataError)
}

/// When a new publication is implausible enough to be held back for one check: most
/// districts changing by more than ``factor`` from the day before at once, as a wrong release
/// of the file would (the RKI published one on 2026-07-28).
///
/// A district jumps when `(max + 1) / (min + 1) > factor` of its value on the newest day and
/// the day before (the `+ 1` keeps the low incidences of 2026, where 0.2 -> 1.4 is noise,
/// from counting); the publication is held when more than ``share`` of the region's districts
/// with both values jump.
public struct ReleaseGuard: Sendable, Hashable {
    public var factor: Double
    public var share: Double

    public init(factor: Double = 5, share: Double = 0.5) {
        self.factor = factor
        self.share = share
    }

    public static let standard = ReleaseGuard()
    /// Never holds anything.
    public static let off = ReleaseGuard(factor: .infinity, share: 1)

    /// Why `newest` is implausible against `before`, or `nil` when it is not.
    public func verdict(newest: Dataset, before: Dataset, region: Region) -> String? {
        guard factor.isFinite, share < 1 else { return nil }
        var compared = 0
        var jumps: [(String, Double, Double)] = []
        for entry in newest.districts(in: region) {
            guard let old = before[entry.district.ags]?.incidence, let new = entry.incidence else { continue }
            compared += 1
            let high = max(old, new), low = min(old, new)
            if (high + 1) / (low + 1) > factor { jumps.append((entry.district.ags, old, new)) }
        }
        guard compared > 0, Double(jumps.count) > share * Double(compared) else { return nil }
        let examples = jumps.prefix(3).map { "\($0.0) \($0.1) -> \($0.2)" }.joined(separator: ", ")
        return "\(jumps.count) of \(compared) districts changed by more than a factor of \(factor.formatted()) from \(before.date) to \(newest.date) (\(examples)): held as a possibly wrong release until the next check still shows it"
    }
}

/// Where the data in force came from at start-up.
public enum StartOrigin: String, Sendable, Hashable {
    /// The on-disk cache of the last good dataset.
    case cache
    /// The bundled fallback snapshot (no cache, or an unreadable one).
    case bundled
    /// The (fixed) source itself.
    case source
    /// Nothing: a fixed source failed; ``IncidenceStore/status(now:)`` says why.
    case none
}

/// Counters for logs and metrics.
public struct DataCounters: Sendable, Hashable {
    /// Refreshes that asked the source.
    public var checks = 0
    /// Refreshes that took a new publication.
    public var updates = 0
    /// Refreshes that found the publication in force.
    public var unchanged = 0
    /// Rejected answers by reason.
    public var rejections: [DataError.Reason: Int] = [:]
    /// Cache files that could not be read or written.
    public var cacheErrors = 0
    /// Checks the source answered `304 Not Modified`.
    public var notModified = 0
    /// Values of earlier days that a newer file revised, left as first read (counted per file).
    public var revisions = 0
    /// New files for the day in force with other values, applied.
    public var corrections = 0
    /// Publications held back as implausible (``ReleaseGuard``).
    public var held = 0
    /// Rows of no district (`17000`, `u`) skipped, over all files read.
    public var skippedRows = 0

    public init() {}
}

/// What the data layer knows at one moment: the data in force and how much to trust it.
public struct DataStatus: Sendable, Hashable {
    /// The dataset in force, if any.
    public let dataset: Dataset?
    /// Whether signals built on ``dataset`` must say `stale`; see ``IncidenceStore/isStale(now:)``.
    public let stale: Bool
    /// The source's name, e.g. `rki`.
    public let source: String
    /// Where the data came from at start-up.
    public let origin: StartOrigin?
    /// The last time the source answered with valid data (new or unchanged).
    public let lastSuccess: Date?
    /// The last rejection, and when.
    public let lastError: DataError?
    public let lastErrorAt: Date?
    /// Whether the source failed after its last success.
    public let failedSinceSuccess: Bool
    public let counters: DataCounters
    /// The last time the source was asked, whatever the outcome.
    public let lastCheck: Date?
    /// Why the newest publication is held back, while it is.
    public let held: DataError?
    /// Whether the data in force is the bundled stand-in of a live source that has not
    /// answered yet (no cache).
    public let standIn: Bool
    /// The failed attempt of the check under way, while it waits to try again: said at once,
    /// not after the last retry. The data's staleness does not change for it.
    public let retrying: DataError?

    public init(dataset: Dataset?, stale: Bool, source: String, origin: StartOrigin?, lastSuccess: Date?,
                lastError: DataError?, lastErrorAt: Date?, failedSinceSuccess: Bool, counters: DataCounters,
                lastCheck: Date? = nil, held: DataError? = nil, standIn: Bool = false, retrying: DataError? = nil) {
        self.lastCheck = lastCheck
        self.held = held
        self.standIn = standIn
        self.retrying = retrying
        self.dataset = dataset
        self.stale = stale
        self.source = source
        self.origin = origin
        self.lastSuccess = lastSuccess
        self.lastError = lastError
        self.lastErrorAt = lastErrorAt
        self.failedSinceSuccess = failedSinceSuccess
        self.counters = counters
    }
}
