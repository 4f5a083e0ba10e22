import AmpelDomain
import Foundation
import Logging

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
public struct RKIDatasetClient: ConditionalSource {
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

    public var name: String { "rki" }

    /// The file, unless it is still the version `validators` describe; each failed attempt
    /// that will be retried is told to `attemptFailed`.
    public func check(ifChanged validators: HTTPValidators?, attemptFailed: (@Sendable (DataError) -> Void)?) async throws(DataError) -> SourceAnswer {
        let configuration = self.configuration
        let download = FileDownload(
            url: configuration.url, stallTimeout: configuration.stallTimeout, timeout: configuration.timeout,
            clock: configuration.clock, retry: configuration.retry, userAgent: configuration.userAgent,
            maxBodyBytes: configuration.maxBodyBytes, httpClient: httpClient, logger: logger, what: "RKI download")
        switch try await download.fetch(ifChanged: validators, attemptFailed: attemptFailed, makeParser: {
            DistrictFileParse(reader: RKIDistrictCSV(windowDays: configuration.windowDays), region: configuration.region)
        }) {
        case .notModified: return .notModified
        case .changed(let table, let received): return .publication(publication(table, validators: received))
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
}

/// The district file's reader as a download's parser: finished for the client's region.
final class DistrictFileParse: StreamingFileParser {
    let reader: RKIDistrictCSV
    let region: Region

    init(reader: RKIDistrictCSV, region: Region) {
        self.reader = reader
        self.region = region
    }

    func consume(_ chunk: UnsafeRawBufferPointer) throws(DataError) { try reader.consume(chunk) }
    func finish() throws(DataError) -> RKIDistrictCSV.Table { try reader.finish(region: region) }
}
