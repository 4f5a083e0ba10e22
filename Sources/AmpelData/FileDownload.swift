import AmpelDomain
import Foundation
import Logging
import Synchronization

/// Reads a data file while it arrives and turns it into a value; a fresh one per attempt.
///
/// > Note: A parser reads one body; it is not for sharing between tasks.
protocol StreamingFileParser: AnyObject, SendableMetatype {
    associatedtype Output: Sendable
    func consume(_ chunk: UnsafeRawBufferPointer) throws(DataError)
    func finish() throws(DataError) -> Output
}

/// What one conditional download found.
enum DownloadAnswer<Output: Sendable>: Sendable {
    /// Still the version the validators describe (`304 Not Modified`, or an unchanged file).
    case notModified
    case changed(Output, validators: HTTPValidators?)
}

/// One data file of a live source, asked for conditionally: the machinery every live RKI
/// file shares (the incidence file, the hospitalisation and intensive-care files).
///
/// A check is a conditional GET (`If-None-Match` with the last `ETag`, `If-Modified-Since`
/// with the last `Last-Modified`), so an unchanged file costs a `304` and no parsing; the body
/// is parsed while it streams; a body that stalls for ``stallTimeout`` and a download longer
/// than ``timeout`` fail; transient failures are retried (``RetryPolicy``). A `file://` URL is
/// read the same way, its size and modification time standing in for an `ETag`.
struct FileDownload: Sendable {
    var url: String
    var stallTimeout: Duration
    var timeout: Duration
    var clock: any Clock<Duration>
    var retry: RetryPolicy
    var userAgent: String
    var maxBodyBytes: Int
    var httpClient: HTTPClient
    var logger: Logger
    /// What the file is, for logs: "RKI download".
    var what: String

    /// The file parsed by a parser from `makeParser`, unless it is still the version `validators` describe.
    func fetch<Parser: StreamingFileParser>(
        ifChanged validators: HTTPValidators?, attemptFailed: (@Sendable (DataError) -> Void)?,
        makeParser: @escaping @Sendable () -> Parser
    ) async throws(DataError) -> DownloadAnswer<Parser.Output> {
        if let file = Self.fileURL(url) {
            return try readFile(file, ifChanged: validators, parser: makeParser())
        }
        return try await DataHTTP.retrying(retry, logger: logger, what: what, attemptFailed: attemptFailed) {
            () async throws(DataHTTP.Failure) -> DownloadAnswer<Parser.Output> in
            try await attempt(validators, makeParser: makeParser)
        }
    }

    /// Whether `url` is an `http(s)` URL with a host or a `file://` path.
    static func isValidURL(_ url: String) -> Bool {
        DataHTTP.isValidURL(url) || fileURL(url) != nil
    }

    static func fileURL(_ url: String) -> URL? {
        guard url.lowercased().hasPrefix("file://"), let parsed = URL(string: url), parsed.isFileURL, !parsed.path.isEmpty else { return nil }
        return parsed
    }

    // MARK: - file://

    func readFile<Parser: StreamingFileParser>(_ url: URL, ifChanged validators: HTTPValidators?,
                                               parser: Parser) throws(DataError) -> DownloadAnswer<Parser.Output> {
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
        do {
            while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                // An untyped closure: typed throws through withUnsafeBytes crash the 6.3 compiler.
                try chunk.withUnsafeBytes { bytes throws in try parser.consume(bytes) }
            }
        } catch let error as DataError {
            throw DataError(error.reason, "'\(path)': \(error.message)")
        } catch {
            throw DataError(.io, "cannot read '\(path)': \(error.localizedDescription)")
        }
        do {
            return .changed(try parser.finish(), validators: version)
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
    private final class Parse<Parser: StreamingFileParser>: @unchecked Sendable {
        let parser: Parser
        var bytes = 0

        init(_ parser: Parser) {
            self.parser = parser
        }
    }

    /// One download, bounded by the stall timeout and the whole timeout.
    func attempt<Parser: StreamingFileParser>(
        _ validators: HTTPValidators?, makeParser: @escaping @Sendable () -> Parser
    ) async throws(DataHTTP.Failure) -> DownloadAnswer<Parser.Output> {
        var headers: [(name: String, value: String)] = [
            ("User-Agent", userAgent),
            ("Accept", "text/csv, text/plain;q=0.9, */*;q=0.5"),
        ]
        if let etag = validators?.etag { headers.append(("If-None-Match", etag)) }
        if let modified = validators?.lastModified { headers.append(("If-Modified-Since", modified)) }
        // The RKI's files compress about 6:1 (GitHub sends them gzipped when asked).
        let request = HTTPClient.Request(url: url, headers: headers, acceptsCompression: true)
        let client = httpClient
        let progress = Progress()
        let host = DataHTTP.hostOf(url)
        let (stallTimeout, timeout, clock, maxBodyBytes) = (self.stallTimeout, self.timeout, self.clock, self.maxBodyBytes)
        do {
            return try await withThrowingTaskGroup(of: DownloadAnswer<Parser.Output>.self) { group in
                group.addTask {
                    let parse = Parse(makeParser())
                    let head = try await client.send(request) { head, chunk in
                        progress.chunks.add(1, ordering: .relaxed)
                        // The body of a 304 or an error is not the file.
                        guard head.isSuccess else { return }
                        parse.bytes += chunk.count
                        guard parse.bytes <= maxBodyBytes else {
                            throw HTTPClient.BodyTooLarge(maxBytes: maxBodyBytes)
                        }
                        try parse.parser.consume(chunk)
                    }
                    if head.status == 304 { return .notModified }
                    guard head.isSuccess else { throw DataHTTP.StatusError(code: head.status, reason: head.reason) }
                    let received = HTTPValidators(etag: head.first(name: "ETag"), lastModified: head.first(name: "Last-Modified"))
                    return .changed(try parse.parser.finish(), validators: received.isEmpty ? nil : received)
                }
                group.addTask {
                    // No progress over a whole stall period: the body has stopped.
                    var seen = -1
                    while true {
                        try await clock.sleep(for: stallTimeout)
                        let now = progress.chunks.load(ordering: .relaxed)
                        if now == seen { throw Stalled() }
                        seen = now
                    }
                }
                group.addTask {
                    try await clock.sleep(for: timeout)
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
            throw DataHTTP.Failure(error: DataError(.timeout, "the download from \(host) stalled: no data for \(stallTimeout)"), retryable: true)
        } catch {
            throw DataHTTP.failure(of: error, url: url, timeout: timeout, maxBytes: maxBodyBytes)
        }
    }
}
