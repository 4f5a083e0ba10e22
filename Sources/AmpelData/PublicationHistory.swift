import AmpelDomain
import Foundation

/// The last publications on disk, next to the cache: what trend and day counts are computed
/// from after a restart.
///
/// One file, `incidence-history.json`, written with ``AtomicFile`` like the cache. Each entry
/// is a dataset in the cache's own form (``DatasetCache``), one per publication day, oldest
/// first: `{"format": "ampel-incidence-history", "version": 1, "publications": [<cache file>, ...]}`.
/// A file that cannot be read back is reported as a ``DataError``; the store moves it aside
/// and starts a new history.
public struct PublicationHistory: Sendable {
    /// The state directory.
    public let directory: URL
    /// How many publications are kept.
    public let length: Int

    public static let fileName = "incidence-history.json"
    /// The default of `data.history`.
    public static let defaultLength = 28
    static let format = "ampel-incidence-history"
    static let version = 1

    public init(directory: URL, length: Int = PublicationHistory.defaultLength) {
        self.directory = directory
        self.length = max(1, length)
    }

    public var fileURL: URL { directory.appendingPathComponent(Self.fileName) }

    struct File: Decodable, VersionedJSONFile {
        var format: String
        var version: Int
        var publications: [DatasetCache.File]
    }

    /// `window` with `dataset` added: one publication per day (a new one replaces an older
    /// copy of its day), oldest first, at most `length` of them.
    public static func adding(_ dataset: Dataset, to window: [Dataset], length: Int) -> [Dataset] {
        var kept = window.filter { $0.date != dataset.date }
        var plain = dataset
        plain.courses = [:]
        kept.append(plain)
        kept.sort { $0.date < $1.date }
        return Array(kept.suffix(max(1, length)))
    }

    /// `own` with the days of `file` it lacks, oldest first: a day Ampel already has keeps the
    /// values it first read ("kept as published", docs/data.md). `revised` counts the values
    /// `file` gives differently for those days.
    public static func merging(_ file: [Dataset], into own: [Dataset]) -> (window: [Dataset], revised: Int) {
        var merged = own
        var revised = 0
        for day in file {
            if let kept = merged.first(where: { $0.date == day.date }) {
                revised += day.districts.reduce(0) { count, entry in
                    count + ((kept[entry.key].map { $0.incidence != entry.value.incidence } ?? false) ? 1 : 0)
                }
            } else {
                merged = adding(day, to: merged, length: .max)
            }
        }
        return (merged, revised)
    }

    /// Reads the publications kept, oldest first; empty when there is no file yet.
    ///
    /// - Throws: ``DataError`` when the file exists but is unreadable or holds an invalid dataset.
    public func load() throws(DataError) -> [Dataset] {
        let path = fileURL.path
        guard let file = try File.read(at: fileURL, what: "history", format: Self.format, version: Self.version) else { return [] }
        var window: [Dataset] = []
        for entry in file.publications {
            let dataset = try DatasetCache.dataset(of: entry, in: "the history file '\(path)', publication \(entry.date)")
            window = Self.adding(dataset, to: window, length: length)
        }
        return window
    }

    /// Writes `window` atomically, creating the directory if needed.
    public func save(_ window: [Dataset], savedAt: Date = Date()) throws(DataError) {
        var json = JSONWriter(capacity: 160 * window.reduce(0) { $0 + $1.districts.count } + 256)
        json.raw(#"{"format":"#)
        json.string(Self.format)
        json.raw(#","publications":["#)
        for (index, dataset) in window.enumerated() {
            if index > 0 { json.raw(",") }
            DatasetCache.write(dataset, savedAt: savedAt, validators: nil, to: &json)
        }
        json.raw(#"],"version":"#)
        json.number(Self.version)
        json.raw("}")
        try DatasetCache.writeAtomically(json.bytes, to: fileURL, in: directory)
    }

    /// Moves an unreadable history file aside (`incidence-history.json.corrupt-<UTC time>`).
    public func moveAside(now: Date = Date()) throws(DataError) -> String {
        try DatasetCache.moveAside(fileURL.path, now: now)
    }
}
