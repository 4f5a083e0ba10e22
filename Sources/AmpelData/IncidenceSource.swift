import AmpelDomain
import Foundation

/// Where incidence data comes from: the live RKI service, a snapshot or the daily history.
///
/// Every source answers a whole, validated ``Dataset`` or a ``DataError``; whatever it
/// answers goes through ``IncidenceStore``, which decides whether it replaces the data in
/// force. `isLive` tells the store whether the data can age: a fixed source (a snapshot
/// file, the history at a chosen day) is what the user asked for and is never stale by age.
public protocol IncidenceSource: Sendable {
    /// A short name for logs and `Dataset.source`, e.g. `rki`, `snapshot:2020-11-05`.
    var name: String { get }
    /// Whether the source follows new publications (and so can fail, and its data can age).
    var isLive: Bool { get }
    /// Fetches and validates one complete dataset.
    func fetch() async throws(DataError) -> Dataset
    /// Up to `count` publications before `day`, oldest first, where the source knows its
    /// past (the bundled daily history); empty otherwise.
    func earlier(than day: Day, count: Int) -> [Dataset]
    /// Asks for the publication unless it is still the one `validators` describe (a
    /// conditional request); sources that cannot tell answer a whole publication each time.
    func check(ifChanged validators: HTTPValidators?) async throws(DataError) -> SourceAnswer
    /// ``check(ifChanged:)``, telling `attemptFailed` of each failed attempt that will be tried
    /// again, so that the store shows it at once instead of after the last retry.
    func check(ifChanged validators: HTTPValidators?, attemptFailed: (@Sendable (DataError) -> Void)?) async throws(DataError) -> SourceAnswer
}

extension IncidenceSource {
    public func earlier(than day: Day, count: Int) -> [Dataset] { [] }

    public func check(ifChanged validators: HTTPValidators?) async throws(DataError) -> SourceAnswer {
        .publication(Publication(newest: try await fetch()))
    }

    /// A source without retries of its own has no attempt to report.
    public func check(ifChanged validators: HTTPValidators?, attemptFailed: (@Sendable (DataError) -> Void)?) async throws(DataError) -> SourceAnswer {
        try await check(ifChanged: validators)
    }
}

/// A live source that asks its server conditionally itself (the RKI's files on GitHub): it
/// implements ``IncidenceSource/check(ifChanged:attemptFailed:)``, and a plain fetch or a check
/// without attempts to report goes through it.
public protocol ConditionalSource: IncidenceSource {}

extension ConditionalSource {
    public var isLive: Bool { true }

    /// Whether `url` is an `http(s)` URL with a host or a `file://` path.
    public static func isValidURL(_ url: String) -> Bool {
        FileDownload.isValidURL(url)
    }

    /// The newest day of the whole file, whatever its validators.
    public func fetch() async throws(DataError) -> Dataset {
        guard case .publication(let publication) = try await check(ifChanged: nil) else {
            throw DataError(.malformed, "the server answered 304 Not Modified to a request without validators")
        }
        return publication.newest
    }

    public func check(ifChanged validators: HTTPValidators?) async throws(DataError) -> SourceAnswer {
        try await check(ifChanged: validators, attemptFailed: nil)
    }
}

/// What identifies one version of a published file: its `ETag` and `Last-Modified`, sent
/// back as `If-None-Match` and `If-Modified-Since` so that an unchanged file costs a `304`.
public struct HTTPValidators: Sendable, Hashable, Codable {
    public var etag: String?
    public var lastModified: String?

    public init(etag: String?, lastModified: String?) {
        self.etag = etag
        self.lastModified = lastModified
    }

    /// Whether there is anything to send.
    public var isEmpty: Bool { etag == nil && lastModified == nil }
}

/// One answer of a source: the newest day and, for a file that carries its past, the days
/// before it.
public struct Publication: Sendable, Hashable {
    /// The newest day: the publication itself.
    public var newest: Dataset
    /// The days before ``newest`` the file holds (up to the history's length), oldest first.
    public var earlier: [Dataset]
    /// What identifies this version of the file, for the next conditional request.
    public var validators: HTTPValidators?
    /// Rows that belong to no district (`17000`, `u`) or to codes Ampel does not know.
    public var skippedRows: Int

    public init(newest: Dataset, earlier: [Dataset] = [], validators: HTTPValidators? = nil, skippedRows: Int = 0) {
        self.newest = newest
        self.earlier = earlier
        self.validators = validators
        self.skippedRows = skippedRows
    }
}

/// What ``IncidenceSource/check(ifChanged:)`` found.
public enum SourceAnswer: Sendable, Hashable {
    /// The file is still the version the validators describe (`304 Not Modified`).
    case notModified
    case publication(Publication)
}

/// A snapshot of the RKI layer: one of the bundled days, or a user-supplied `f=json` file.
///
/// A file goes through the same ``ArcGISDecoder`` checks as a live answer.
public struct SnapshotSource: IncidenceSource {
    enum Origin: Sendable {
        case bundled(Day?)
        case file(URL)
    }

    let origin: Origin
    let minimumDistricts: Int
    let region: Region

    /// The bundled snapshot published on or before `day` (the latest without a day).
    public init(day: Day? = nil) {
        origin = .bundled(day)
        minimumDistricts = 96
        region = .bavaria
    }

    /// A saved answer of the RKI layer (`f=json`, all pages in one file).
    ///
    /// - Parameter minimumDistricts: how many districts of `region` the file must hold.
    public init(file: URL, minimumDistricts: Int = 96, region: Region = .bavaria) {
        origin = .file(file)
        self.minimumDistricts = minimumDistricts
        self.region = region
    }

    public var name: String {
        switch origin {
        case .bundled(let day): "snapshot:\(day?.iso ?? "latest")"
        case .file(let url): "snapshot:\(url.path)"
        }
    }

    public var isLive: Bool { false }

    public func fetch() async throws(DataError) -> Dataset {
        try load()
    }

    /// The same as ``fetch()``, for callers outside an async context (the CLI).
    public func load() throws(DataError) -> Dataset {
        switch origin {
        case .bundled(let day):
            return try BundledData.shared.snapshot(on: day)
        case .file(let url):
            let data: Data
            do {
                data = try Data(contentsOf: url)
            } catch {
                throw DataError(.io, "cannot read snapshot file '\(url.path)': \(error.localizedDescription)")
            }
            do {
                return try ArcGISDecoder().dataset(data, source: "snapshot:\(url.lastPathComponent)",
                                                   minimumDistricts: minimumDistricts, region: region)
            } catch {
                throw DataError(error.reason, "snapshot file '\(url.path)': \(error.message)")
            }
        }
    }
}

/// The bundled data for a chosen day: the latest snapshot or daily value on or before it
/// (`bundled`), or the daily values of the Bavarian districts only (`history`).
public struct BundledSource: IncidenceSource {
    public enum Kind: String, Sendable {
        /// Snapshots and daily values.
        case bundled
        /// The daily values only (`--source history`).
        case history
    }

    let day: Day?
    let kind: Kind

    /// The publication on or before `day` (the latest bundled one without a day).
    public init(day: Day? = nil, _ kind: Kind = .bundled) {
        self.day = day
        self.kind = kind
    }

    public var name: String { "\(kind.rawValue):\(day?.iso ?? "latest")" }
    public var isLive: Bool { false }

    public func earlier(than day: Day, count: Int) -> [Dataset] {
        BundledData.shared.historyWindow(before: day, count: count)
    }

    public func fetch() async throws(DataError) -> Dataset {
        try load()
    }

    /// The same as ``fetch()``, for callers outside an async context (the CLI).
    public func load() throws(DataError) -> Dataset {
        switch kind {
        case .bundled: try BundledData.shared.dataset(on: day)
        case .history: try BundledData.shared.history(on: day)
        }
    }
}
