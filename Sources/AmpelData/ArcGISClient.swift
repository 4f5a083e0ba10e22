import AmpelDomain
import Foundation
import Logging

/// The live source: the RKI ArcGIS feature layer `RKI_Landkreisdaten`.
///
/// One ``fetch()`` asks for every district, follows the service's paging
/// (`exceededTransferLimit` with `resultOffset`/`resultRecordCount`) until the last page,
/// and hands the pages to ``ArcGISDecoder``, so a partial, malformed or error answer is a
/// ``DataError`` and never a dataset. Each request has a timeout and transient failures are
/// retried with exponential backoff and jitter (``RetryPolicy``).
///
/// ```swift
/// let client = ArcGISClient(configuration: .init(url: "http://127.0.0.1:8080/query"))
/// let dataset = try await client.fetch()
/// ```
///
/// > Note: The requests go through ``HTTPClient/shared`` unless the client is given another.
public struct ArcGISClient: IncidenceSource {
    /// Where and how to ask.
    public struct Configuration: Sendable {
        /// The layer's `query` endpoint; mirrors and tests give their own.
        public var url: String
        /// `resultRecordCount`: how many features to ask for per page. The service may send
        /// fewer (its own maximum) and says so with `exceededTransferLimit`.
        public var pageSize: Int
        /// The most pages one fetch follows; more means a service that never stops paging.
        public var maxPages: Int
        /// The time one request (one page, one attempt) may take from sending to the last byte.
        public var timeout: Duration
        /// The clock that measures ``timeout``; tests pass one they advance by hand, so a
        /// stalled answer times out on an event instead of after real waiting.
        public var timeoutClock: any Clock<Duration>
        /// How failed requests are retried.
        public var retry: RetryPolicy
        /// The `User-Agent` header.
        public var userAgent: String
        /// The largest body accepted, in bytes.
        public var maxBodyBytes: Int
        /// How many districts of `region` a complete answer holds at least (RKI: 96 in Bavaria).
        public var minimumDistricts: Int
        /// The monitored region, for the completeness check.
        public var region: Region

        public init(
            url: String = ArcGISClient.defaultURL,
            pageSize: Int = 1000,
            maxPages: Int = 50,
            timeout: Duration = .seconds(30),
            timeoutClock: any Clock<Duration> = ContinuousClock(),
            retry: RetryPolicy = .standard,
            userAgent: String = DataHTTP.userAgent,
            maxBodyBytes: Int = 32 << 20,
            minimumDistricts: Int = 96,
            region: Region = .bavaria
        ) {
            self.url = url
            self.pageSize = max(1, pageSize)
            self.maxPages = max(1, maxPages)
            self.timeout = timeout
            self.timeoutClock = timeoutClock
            self.retry = retry
            self.userAgent = userAgent
            self.maxBodyBytes = maxBodyBytes
            self.minimumDistricts = minimumDistricts
            self.region = region
        }
    }

    /// The RKI's public `query` endpoint of `RKI_Landkreisdaten`.
    public static let defaultURL =
        "https://services7.arcgis.com/mOBPykOjAyBO2ZKk/arcgis/rest/services/RKI_Landkreisdaten/FeatureServer/0/query"

    public let configuration: Configuration
    let httpClient: HTTPClient
    let logger: Logger

    /// - Parameters:
    ///   - httpClient: the client to send requests with (the process's by default).
    ///   - logger: receives retries (notice) and rejected answers (warning).
    public init(configuration: Configuration = Configuration(), httpClient: HTTPClient = .shared,
                logger: Logger = Logger(label: "ampel.data.rki")) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.logger = logger
    }

    public var name: String { "arcgis" }
    public var isLive: Bool { true }

    /// The URL of the page starting at `offset`.
    public func pageURL(offset: Int) -> String {
        let query = [
            "where=1%3D1",
            "outFields=" + ArcGISDecoder.outFields.joined(separator: ","),
            "returnGeometry=false",
            "resultOffset=\(offset)",
            "resultRecordCount=\(configuration.pageSize)",
            "f=json",
        ].joined(separator: "&")
        return configuration.url + (configuration.url.contains("?") ? "&" : "?") + query
    }

    /// Fetches every page and validates the whole answer.
    ///
    /// - Throws: ``DataError`` with reason `http`, `timeout` or `network` when the service
    ///   could not be reached (after the retries), or the decoder's reason when the answer is
    ///   wrong; the message names the page.
    public func fetch() async throws(DataError) -> Dataset {
        try await fetch(attemptFailed: nil)
    }

    /// The whole layer as one publication; each failed attempt that will be retried is told
    /// to `attemptFailed`.
    public func check(ifChanged validators: HTTPValidators?, attemptFailed: (@Sendable (DataError) -> Void)?) async throws(DataError) -> SourceAnswer {
        .publication(Publication(newest: try await fetch(attemptFailed: attemptFailed)))
    }

    func fetch(attemptFailed: (@Sendable (DataError) -> Void)?) async throws(DataError) -> Dataset {
        let decoder = ArcGISDecoder()
        var pages: [ArcGISDecoder.Page] = []
        var offset = 0
        for index in 0..<configuration.maxPages {
            let body = try await get(pageURL(offset: offset), page: index, attemptFailed: attemptFailed)
            let page: ArcGISDecoder.Page
            do {
                page = try decoder.decodePage(body)
            } catch {
                throw DataError(error.reason, "\(describePage(index, offset)): \(error.message)")
            }
            pages.append(page)
            guard page.exceededTransferLimit else {
                let dataset = try decoder.dataset(from: pages, source: name, minimumDistricts: configuration.minimumDistricts,
                                                  region: configuration.region)
                logger.debug("fetched RKI data", metadata: [
                    "date": "\(dataset.date)", "districts": "\(dataset.districts.count)", "pages": "\(pages.count)",
                ])
                return dataset
            }
            guard !page.entries.isEmpty else {
                throw DataError(.malformed, "\(describePage(index, offset)) is empty but says more pages follow")
            }
            offset += page.entries.count
        }
        throw DataError(.malformed, "the answer did not end within \(configuration.maxPages) pages")
    }

    func describePage(_ index: Int, _ offset: Int) -> String {
        "page \(index + 1) (resultOffset \(offset))"
    }

    /// One page, with retries.
    func get(_ url: String, page: Int, attemptFailed: (@Sendable (DataError) -> Void)? = nil) async throws(DataError) -> Data {
        try await DataHTTP.retrying(configuration.retry, logger: logger, what: "RKI request for page \(page + 1)",
                                    attemptFailed: attemptFailed) { () async throws(DataHTTP.Failure) -> Data in
            try await attemptGet(url)
        }
    }

    /// One request, bounded by ``Configuration/timeout`` from sending to the last body byte.
    func attemptGet(_ url: String) async throws(DataHTTP.Failure) -> Data {
        let request = HTTPClient.Request(url: url, headers: [("User-Agent", configuration.userAgent), ("Accept", "application/json")])
        let client = httpClient
        let timeout = configuration.timeout
        let clock = configuration.timeoutClock
        let maxBody = configuration.maxBodyBytes
        do {
            return try await withThrowingTaskGroup(of: Data.self) { group in
                group.addTask {
                    let (head, body) = try await client.collect(request, upTo: maxBody)
                    guard head.isSuccess else { throw DataHTTP.StatusError(code: head.status, reason: head.reason) }
                    return Data(body)
                }
                group.addTask {
                    try await clock.sleep(for: timeout)
                    throw DataHTTP.TimedOut()
                }
                defer { group.cancelAll() }
                guard let body = try await group.next() else { throw CancellationError() }
                return body
            }
        } catch {
            throw DataHTTP.failure(of: error, url: url, timeout: timeout, maxBytes: maxBody)
        }
    }
}

extension Duration {
    /// The whole duration in nanoseconds (saturating).
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return scaled.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}
