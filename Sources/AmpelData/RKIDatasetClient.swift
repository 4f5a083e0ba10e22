import AmpelDomain
import Foundation
import Logging
import Synchronization

/// The live source `rki`: the RKI's maintained open dataset "COVID-19_7-Tage-Inzidenz_in_Deutschland",
/// its district file `COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.csv` (CC BY 4.0, updated daily).
///
/// Every check is a conditional GET (`If-None-Match` with the last `ETag`, `If-Modified-Since`
/// with the last `Last-Modified`): an unchanged file costs a `304` and no parsing. A changed
/// file is parsed by ``RKIDistrictCSV`` while it streams, so the client never holds the
/// file, only the last ``Configuration/windowDays`` days. A stalled body (no byte for
/// ``Configuration/stallTimeout``) and a download longer than ``Configuration/timeout`` fail;
/// transient failures are retried (``RetryPolicy``). `file://` URLs are read the same way,
/// the file's size and modification time standing in for an `ETag`.
///
/// ```swift
/// let client = RKIDatasetClient(configuration: .init(region: ruleSet.region))
/// let answer = try await client.check(ifChanged: lastValidators)
/// ```
public struct RKIDatasetClient: IncidenceSource {
    /// Where and how to ask.
    public struct Configuration: Sendable {
        /// The district file: GitHub's raw file by default; a mirror (Zenodo, a file on the
        /// local network, a test server) or a `file://` path.
        public var url: String
        /// How many days up to the newest one are kept (the history's length).
        public var windowDays: Int
        /// The districts that must all have a row on the newest day.
        public var region: Region
        /// How long the body may send nothing before the download is given up.
        public var stallTimeout: Duration
        /// How long one whole download may take.
        public var timeout: Duration
        /// The clock of both timeouts; tests pass one they control.
        public var clock: any Clock<Duration>
        /// How failed requests are retried.
        public var retry: RetryPolicy
        public var userAgent: String
        /// The largest body accepted, in bytes (the file grows by about 18 KB a day).
        public var maxBodyBytes: Int

        public init(
            url: String = RKIDatasetClient.defaultURL,
            windowDays: Int = PublicationHistory.defaultLength,
            region: Region = .bavaria,
            stallTimeout: Duration = .seconds(30),
            timeout: Duration = .seconds(600),
            clock: any Clock<Duration> = ContinuousClock(),
            retry: RetryPolicy = .standard,
            userAgent: String = DataHTTP.userAgent,
            maxBodyBytes: Int = 1 << 30
        ) {
            self.url = url
            self.windowDays = max(1, windowDays)
            self.region = region
            self.stallTimeout = stallTimeout
            self.timeout = timeout
            self.clock = clock
            self.retry = retry
            self.userAgent = userAgent
            self.maxBodyBytes = maxBodyBytes
        }
    }

    /// The district file on the `main` branch of the RKI's GitHub repository.
    public static let defaultURL =
        "https://raw.githubusercontent.com/robert-koch-institut/COVID-19_7-Tage-Inzidenz_in_Deutschland/main/COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.csv"

    public let configuration: Configuration
    let httpClient: HTTPClient
    let logger: Logger

    /// - Parameter httpClient: the client to send requests with (the process's by default).
    public init(configuration: Configuration = Configuration(), httpClient: HTTPClient = .shared,
                logger: Logger = Logger(label: "ampel.data.rki")) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.logger = logger
    }

    /// Whether `url` is an `http(s)` URL with a host or a `file://` path.
    public static func isValidURL(_ url: String) -> Bool {
        DataHTTP.isValidURL(url) || fileURL(url) != nil
    }

    static func fileURL(_ url: String) -> URL? {
        guard url.lowercased().hasPrefix("file://"), let parsed = URL(string: url), parsed.isFileURL, !parsed.path.isEmpty else { return nil }
        return parsed
    }

    public var name: String { "rki" }
    public var isLive: Bool { true }

    /// The newest day of the file, whatever its validators.
    public func fetch() async throws(DataError) -> Dataset {
        guard case .publication(let publication) = try await check(ifChanged: nil) else {
            throw DataError(.malformed, "the server answered 304 Not Modified to a request without validators")
        }
        return publication.newest
    }

    /// The file, unless it is still the version `validators` describe.
    public func check(ifChanged validators: HTTPValidators?) async throws(DataError) -> SourceAnswer {
        try await check(ifChanged: validators, attemptFailed: nil)
    }

    /// The file, unless it is still the version `validators` describe; each failed attempt
    /// that will be retried is told to `attemptFailed`.
    public func check(ifChanged validators: HTTPValidators?, attemptFailed: (@Sendable (DataError) -> Void)?) async throws(DataError) -> SourceAnswer {
        if let file = Self.fileURL(configuration.url) {
            return try readFile(file, ifChanged: validators)
        }
        return try await DataHTTP.retrying(configuration.retry, logger: logger, what: "RKI download",
                                           attemptFailed: attemptFailed) { () async throws(DataHTTP.Failure) -> SourceAnswer in
            try await attempt(validators)
        }
    }

    /// The table as a publication: the newest day and the days before it.
    func publication(_ table: RKIDistrictCSV.Table, validators: HTTPValidators?) -> Publication {
        if table.skippedRows > 0 {
            logger.debug("skipped rows of no district", metadata: [
                "rows": "\(table.skippedRows)", "codes": "\(table.skippedCodes.joined(separator: ","))",
            ])
        }
        return Publication(newest: table.datasets[table.datasets.count - 1], earlier: Array(table.datasets.dropLast()),
                           validators: validators, skippedRows: table.skippedRows)
    }

    // MARK: - file://

    func readFile(_ url: URL, ifChanged validators: HTTPValidators?) throws(DataError) -> SourceAnswer {
        let path = url.path
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw DataError(.io, "cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        let version = HTTPValidators(etag: "\"\(info.st_size)-\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)\"", lastModified: nil)
        if let validators, validators.etag == version.etag { return .notModified }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw DataError(.io, "cannot open '\(path)': \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        let reader = RKIDistrictCSV(windowDays: configuration.windowDays)
        do {
            while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                try reader.consume(chunk)
            }
        } catch let error as DataError {
            throw DataError(error.reason, "'\(path)': \(error.message)")
        } catch {
            throw DataError(.io, "cannot read '\(path)': \(error.localizedDescription)")
        }
        do {
            return .publication(publication(try reader.finish(region: configuration.region), validators: version))
        } catch {
            throw DataError(error.reason, "'\(path)': \(error.message)")
        }
    }

    // MARK: - HTTP

    private struct Stalled: Error {}

    /// Counts arriving body chunks, for the stall watchdog.
    private final class Progress: Sendable {
        let chunks = Atomic<Int>(0)
    }

    /// The parser of one download: fed by the transfer's callbacks on the HTTP client's
    /// thread, finished by the caller once the transfer has completed.
    private final class Parse: @unchecked Sendable {
        let reader: RKIDistrictCSV
        var bytes = 0

        init(windowDays: Int) {
            reader = RKIDistrictCSV(windowDays: windowDays)
        }
    }

    /// One download, bounded by the stall timeout and the whole timeout.
    func attempt(_ validators: HTTPValidators?) async throws(DataHTTP.Failure) -> SourceAnswer {
        var headers: [(name: String, value: String)] = [
            ("User-Agent", configuration.userAgent),
            ("Accept", "text/csv, text/plain;q=0.9, */*;q=0.5"),
        ]
        if let etag = validators?.etag { headers.append(("If-None-Match", etag)) }
        if let modified = validators?.lastModified { headers.append(("If-Modified-Since", modified)) }
        // The file compresses about 6:1 (GitHub sends it gzipped when asked).
        let request = HTTPClient.Request(url: configuration.url, headers: headers, acceptsCompression: true)
        let client = httpClient
        let configuration = self.configuration
        let progress = Progress()
        let host = DataHTTP.hostOf(configuration.url)
        do {
            return try await withThrowingTaskGroup(of: SourceAnswer.self) { group in
                group.addTask {
                    let parse = Parse(windowDays: configuration.windowDays)
                    let head = try await client.send(request) { head, chunk in
                        progress.chunks.add(1, ordering: .relaxed)
                        // The body of a 304 or an error is not the file.
                        guard head.isSuccess else { return }
                        parse.bytes += chunk.count
                        guard parse.bytes <= configuration.maxBodyBytes else {
                            throw HTTPClient.BodyTooLarge(maxBytes: configuration.maxBodyBytes)
                        }
                        try parse.reader.consume(chunk)
                    }
                    if head.status == 304 { return .notModified }
                    guard head.isSuccess else { throw DataHTTP.StatusError(code: head.status, reason: head.reason) }
                    let received = HTTPValidators(etag: head.first(name: "ETag"), lastModified: head.first(name: "Last-Modified"))
                    let table = try parse.reader.finish(region: configuration.region)
                    return .publication(self.publication(table, validators: received.isEmpty ? nil : received))
                }
                group.addTask {
                    // No progress over a whole stall period: the body has stopped.
                    var seen = -1
                    while true {
                        try await configuration.clock.sleep(for: configuration.stallTimeout)
                        let now = progress.chunks.load(ordering: .relaxed)
                        if now == seen { throw Stalled() }
                        seen = now
                    }
                }
                group.addTask {
                    try await configuration.clock.sleep(for: configuration.timeout)
                    throw DataHTTP.TimedOut()
                }
                defer { group.cancelAll() }
                guard let answer = try await group.next() else { throw CancellationError() }
                return answer
            }
        } catch let error as DataError {
            // The file arrived but is not valid: asking again at once will not help.
            throw DataHTTP.Failure(error: error, retryable: false)
        } catch is Stalled {
            throw DataHTTP.Failure(error: DataError(.timeout, "the download from \(host) stalled: no data for \(configuration.stallTimeout)"), retryable: true)
        } catch {
            throw DataHTTP.failure(of: error, url: configuration.url, timeout: configuration.timeout, maxBytes: configuration.maxBodyBytes)
        }
    }
}
