import CAmpelCurl
import Foundation
import Synchronization

/// Ampel's HTTP client: libcurl's multi interface, driven by one thread of its own.
///
/// The live sources GET through it and the webhooks POST through it. libcurl comes with the
/// system (`libcurl4`, TLS by OpenSSL with the system's CA store) instead of a TLS stack
/// compiled with Ampel: building BoringSSL for AsyncHTTPClient was 131 s of a first build's
/// 300 s on 2 cores (docs/DESIGN.md, decision 69).
///
/// A body is handed to `receive` chunk by chunk on the client's thread while it arrives, so
/// a consumer that parses as it goes (the RKI file) holds no more than a chunk, and a slow
/// consumer slows the download instead of piling it up.
///
/// ```swift
/// let (head, body) = try await HTTPClient.shared.collect(.init(url: "https://example.org/"), upTo: 1 << 20)
/// ```
public final class HTTPClient: Sendable {
    /// One request.
    public struct Request: Sendable {
        public var url: String
        /// `GET` or `POST`.
        public var method: String
        public var headers: [(name: String, value: String)]
        /// The body of a `POST`.
        public var body: [UInt8]
        /// How many redirects are followed; 0 answers with the redirect itself.
        public var redirects: Int
        /// How long connecting (name, TCP, TLS) may take.
        public var connectTimeout: Duration
        /// How long the whole exchange may take; `nil`: no bound here (the caller bounds it).
        public var timeout: Duration?
        /// Sends `Accept-Encoding` with what libcurl can decode (gzip, deflate, br, zstd as
        /// built); the body arrives decoded.
        public var acceptsCompression: Bool

        public init(url: String, method: String = "GET", headers: [(name: String, value: String)] = [],
                    body: [UInt8] = [], redirects: Int = 5, connectTimeout: Duration = .seconds(10),
                    timeout: Duration? = nil, acceptsCompression: Bool = false) {
            self.url = url
            self.method = method
            self.headers = headers
            self.body = body
            self.redirects = redirects
            self.connectTimeout = connectTimeout
            self.timeout = timeout
            self.acceptsCompression = acceptsCompression
        }
    }

    /// The status line and header fields of an answer (the last one, after redirects).
    public struct Head: Sendable {
        public var status: Int
        public var reason: String
        public var headers: [(name: String, value: String)]

        /// The first field named `name`, whatever its case.
        public func first(name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }

        public var isSuccess: Bool { (200..<300).contains(status) }
    }

    /// A request that got no complete answer: the network's or the server's fault, in words.
    public struct TransferError: Error, Sendable, CustomStringConvertible {
        public enum Kind: Sendable {
            /// Not an `http(s)` URL with a host.
            case unusableURL
            case unknownHost
            /// Refused, unreachable, reset while connecting.
            case cannotConnect
            /// No connection within ``Request/connectTimeout``.
            case connectTimeout
            /// No complete answer within ``Request/timeout``.
            case timeout
            /// Closed or reset before the answer was complete.
            case connectionLost
            case tls
            case other
        }

        public let kind: Kind
        /// The cause in the system's words: `connection refused`, `unknown host example.org`, …
        public let cause: String
        /// libcurl's code, for the log.
        public let curlCode: Int

        public var description: String { cause }
    }

    /// A body longer than the caller accepts.
    public struct BodyTooLarge: Error, Sendable {
        public let maxBytes: Int
    }

    /// The process's client: its thread starts with the first request and runs for the
    /// process's life. The daemon's sources and webhooks, and the CLI, use it.
    public static let shared = HTTPClient()

    private let loop: CurlLoop

    /// A client with a thread and connections of its own (each test of the client makes one,
    /// and its `deinit` ends them).
    public init() {
        loop = CurlLoop()
    }

    deinit {
        loop.stop()
    }

    /// Sends `request` and hands each chunk of the answer's body to `receive` with the head
    /// it belongs to, on the client's thread, in order. An error thrown by `receive` ends the
    /// transfer and is thrown here.
    ///
    /// - Returns: the answer's head once the whole body was received.
    /// - Throws: ``TransferError``, `CancellationError` when the calling task is cancelled,
    ///   or what `receive` threw.
    public func send(_ request: Request,
                     receive: @escaping @Sendable (Head, UnsafeRawBufferPointer) throws -> Void) async throws -> Head {
        let transfer = CurlTransfer(request: request, receive: receive)
        let loop = self.loop
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.continuation = continuation
                loop.add(transfer)
            }
        } onCancel: {
            transfer.cancelled.store(true, ordering: .releasing)
            loop.cancel(transfer)
        }
    }

    /// Sends `request` and collects the body: up to `maxBytes` of a 2xx answer (more throws
    /// ``BodyTooLarge``), the first 64 kB of any other (the rest is read and dropped, so the
    /// connection can serve the next request).
    public func collect(_ request: Request, upTo maxBytes: Int) async throws -> (head: Head, body: [UInt8]) {
        let sink = BodySink(maxBytes: maxBytes)
        let head = try await send(request) { head, chunk in try sink.append(chunk, of: head) }
        return (head, sink.bytes)
    }

    /// The reason phrase of `status`, for answers that bring none (HTTP/2 has no reason phrase).
    static func standardReason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: ""
        }
    }
}

/// ``HTTPClient/collect(_:upTo:)``'s body: written by one transfer's callbacks on the client's
/// thread, read by the caller once the transfer has completed (its continuation orders the two).
private final class BodySink: @unchecked Sendable {
    let maxBytes: Int
    var bytes: [UInt8] = []

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
    }

    func append(_ chunk: UnsafeRawBufferPointer, of head: HTTPClient.Head) throws {
        guard head.isSuccess else {
            bytes.append(contentsOf: chunk.prefix(max(0, (64 << 10) - bytes.count)))
            return
        }
        guard bytes.count + chunk.count <= maxBytes else { throw HTTPClient.BodyTooLarge(maxBytes: maxBytes) }
        bytes.append(contentsOf: chunk)
    }
}

// MARK: - The transfer and the loop

/// One request in flight. `continuation` is set before the transfer reaches the loop, and
/// `cancelled` may be set from any thread; everything else belongs to the loop's thread.
final class CurlTransfer: @unchecked Sendable {
    let request: HTTPClient.Request
    let receive: @Sendable (HTTPClient.Head, UnsafeRawBufferPointer) throws -> Void
    var continuation: CheckedContinuation<HTTPClient.Head, any Error>?
    let cancelled = Atomic<Bool>(false)

    var easy: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    /// The head being read (the last one, after redirects and `100 Continue`).
    var head: HTTPClient.Head?
    /// What `receive` threw.
    var consumerError: (any Error)?

    init(request: HTTPClient.Request, receive: @escaping @Sendable (HTTPClient.Head, UnsafeRawBufferPointer) throws -> Void) {
        self.request = request
        self.receive = receive
        errorBuffer.initialize(to: 0)
    }

    deinit {
        if let easy { curl_easy_cleanup(easy) }
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    /// Ends the transfer for its caller; a second call does nothing.
    func complete(_ result: Result<HTTPClient.Head, any Error>) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: result)
    }

    /// One header line (CRLF included). A status line starts a new head: redirects and
    /// `100 Continue` come before the answer that counts.
    func headerLine(_ bytes: UnsafeRawBufferPointer) {
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0D || bytes[end - 1] == 0x0A { end -= 1 }
        let line = String(decoding: bytes[..<end], as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
            let status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            let reason = parts.count > 2 ? String(parts[2]) : HTTPClient.standardReason(status)
            head = HTTPClient.Head(status: status, reason: reason, headers: [])
        } else if let colon = line.firstIndex(of: ":"), head != nil {
            let name = String(line[..<colon]).trimmingCharacters(in: .whitespaces)
            let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            head?.headers.append((name, value))
        }
    }

    /// A chunk of the body; false stops the transfer.
    func bodyChunk(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if cancelled.load(ordering: .acquiring) { return false }
        do {
            try receive(currentHead(), bytes)
            return true
        } catch {
            consumerError = error
            return false
        }
    }

    /// The head as read, or as libcurl knows it when no header line came.
    func currentHead() -> HTTPClient.Head {
        if let head { return head }
        var status = 0
        if let easy { _ = ampel_curl_get_long(easy, CURLINFO_RESPONSE_CODE, &status) }
        let made = HTTPClient.Head(status: status, reason: HTTPClient.standardReason(status), headers: [])
        head = made
        return made
    }
}

private let headerCallback: ampel_curl_data_fn = { data, size, count, context in
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    transfer.headerLine(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}

private let bodyCallback: ampel_curl_data_fn = { data, size, count, context in
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.bodyChunk(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
}

/// The thread that drives libcurl's multi handle: transfers are added and cancelled through a
/// queue of commands and a wake-up, so that libcurl is only ever called from this thread.
final class CurlLoop: @unchecked Sendable {
    private enum Command {
        case add(CurlTransfer)
        case cancel(CurlTransfer)
    }

    /// libcurl's global set-up, once before the first handle (thread-safe since 7.84).
    static let globalInit: Void = {
        _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()

    /// What other threads hand to the loop's thread.
    private struct Shared {
        var queue: [Command] = []
        var stopping = false
        /// The thread has left its loop: nothing more is taken, the multi handle is gone.
        var ended = false
    }

    private let shared = Mutex(Shared())
    /// Made, with the thread, by the first transfer: a process that never sends a request
    /// (bundled data, no webhooks) starts neither libcurl (its TLS library's set-up) nor the
    /// thread. Written under `shared`'s lock; afterwards read by the thread, which frees it.
    private var multi: UnsafeMutableRawPointer?
    /// The loop's thread only: the transfers in the multi handle, by easy handle.
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    func add(_ transfer: CurlTransfer) {
        if !submit(.add(transfer)) { transfer.complete(.failure(CancellationError())) }
    }

    func cancel(_ transfer: CurlTransfer) {
        _ = submit(.cancel(transfer))
    }

    /// Ends the thread once it has cancelled what runs.
    func stop() {
        shared.withLock { state in
            guard !state.ended else { return }
            state.stopping = true
            if let multi { curl_multi_wakeup(multi) } else { state.ended = true }
        }
    }

    /// Queues `command` and wakes the thread (starting it with the first `add`); false once
    /// the thread has ended. All under the lock the thread takes before it frees the handle.
    private func submit(_ command: Command) -> Bool {
        shared.withLock { state in
            guard !state.ended, !state.stopping else { return false }
            if multi == nil {
                guard case .add = command else { return true }
                Self.globalInit
                multi = curl_multi_init()
                // Named from inside: a name set from outside does not reach the system's
                // thread, which would keep the name of the thread that started it.
                Thread { [self] in
                    Thread.current.name = "ampel-http"
                    run()
                }.start()
            }
            state.queue.append(command)
            curl_multi_wakeup(multi)
            return true
        }
    }

    private func run() {
        guard let multi else { return }
        while true {
            let (batch, stop) = shared.withLock { state in
                defer { state.queue = [] }
                return (state.queue, state.stopping)
            }
            for command in batch {
                switch command {
                case .add(let transfer): start(transfer)
                case .cancel(let transfer): abandon(transfer, with: CancellationError())
                }
            }
            if stop { break }
            var active: Int32 = 0
            _ = curl_multi_perform(multi, &active)
            finishDone()
            _ = curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        for transfer in Array(running.values) { abandon(transfer, with: CancellationError()) }
        let late = shared.withLock { state in
            state.ended = true
            defer { state.queue = [] }
            return state.queue
        }
        for case .add(let transfer) in late { transfer.complete(.failure(CancellationError())) }
        curl_multi_cleanup(multi)
    }

    /// Sets up `transfer`'s easy handle and adds it to the multi handle.
    private func start(_ transfer: CurlTransfer) {
        guard !transfer.cancelled.load(ordering: .acquiring) else {
            transfer.complete(.failure(CancellationError()))
            return
        }
        guard let easy = curl_easy_init() else {
            transfer.complete(.failure(HTTPClient.TransferError(kind: .other, cause: "libcurl could not make a handle", curlCode: -1)))
            return
        }
        transfer.easy = easy
        let request = transfer.request
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        _ = request.url.withCString { ampel_curl_set_pointer(easy, CURLOPT_URL, $0) }
        // Signals are the daemon's: timeouts must not use SIGALRM.
        _ = ampel_curl_set_long(easy, CURLOPT_NOSIGNAL, 1)
        // file:// and the rest are not for a client of web services.
        _ = "http,https".withCString { ampel_curl_set_pointer(easy, CURLOPT_PROTOCOLS_STR, $0) }
        _ = "http,https".withCString { ampel_curl_set_pointer(easy, CURLOPT_REDIR_PROTOCOLS_STR, $0) }
        _ = ampel_curl_set_long(easy, CURLOPT_FOLLOWLOCATION, request.redirects > 0 ? 1 : 0)
        _ = ampel_curl_set_long(easy, CURLOPT_MAXREDIRS, request.redirects)
        _ = ampel_curl_set_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(request.connectTimeout))
        if let timeout = request.timeout {
            _ = ampel_curl_set_long(easy, CURLOPT_TIMEOUT_MS, Self.milliseconds(timeout))
        }
        if request.acceptsCompression {
            _ = "".withCString { ampel_curl_set_pointer(easy, CURLOPT_ACCEPT_ENCODING, $0) }
        }
        var lines = request.headers.map { "\($0.name): \($0.value)" }
        if request.method == "POST" {
            // A body over 1 MB (libcurl 7.88) would wait a second for a `100 Continue` that few
            // servers send.
            lines.append("Expect:")
            _ = ampel_curl_set_long(easy, CURLOPT_POST, 1)
            _ = ampel_curl_set_long(easy, CURLOPT_POSTFIELDSIZE, request.body.count)
            if request.body.isEmpty {
                _ = "".withCString { ampel_curl_set_pointer(easy, CURLOPT_COPYPOSTFIELDS, $0) }
            } else {
                _ = request.body.withUnsafeBytes { ampel_curl_set_pointer(easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }
            }
        } else if request.method != "GET" {
            _ = request.method.withCString { ampel_curl_set_pointer(easy, CURLOPT_CUSTOMREQUEST, $0) }
        }
        for line in lines {
            transfer.headerList = line.withCString { curl_slist_append(transfer.headerList, $0) }
        }
        _ = ampel_curl_set_pointer(easy, CURLOPT_HTTPHEADER, transfer.headerList)
        _ = ampel_curl_set_data_callback(easy, CURLOPT_HEADERFUNCTION, headerCallback)
        _ = ampel_curl_set_pointer(easy, CURLOPT_HEADERDATA, context)
        _ = ampel_curl_set_data_callback(easy, CURLOPT_WRITEFUNCTION, bodyCallback)
        _ = ampel_curl_set_pointer(easy, CURLOPT_WRITEDATA, context)
        _ = ampel_curl_set_pointer(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer)
        running[easy] = transfer
        _ = curl_multi_add_handle(multi!, easy)
    }

    /// Completes the transfers libcurl reports done.
    private func finishDone() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi!, &left) {
            guard ampel_curl_message_is_done(message) != 0, let easy = ampel_curl_message_handle(message),
                  let transfer = running.removeValue(forKey: easy) else { continue }
            let code = ampel_curl_message_result(message)
            _ = curl_multi_remove_handle(multi!, easy)
            if code == CURLE_OK {
                transfer.complete(.success(transfer.currentHead()))
            } else if let consumerError = transfer.consumerError {
                transfer.complete(.failure(consumerError))
            } else if transfer.cancelled.load(ordering: .acquiring) {
                transfer.complete(.failure(CancellationError()))
            } else {
                transfer.complete(.failure(Self.error(code, of: transfer, easy: easy)))
            }
        }
    }

    /// Takes `transfer` out of the multi handle, if it is there, and completes it with `error`.
    private func abandon(_ transfer: CurlTransfer, with error: any Error) {
        guard let easy = transfer.easy, running[easy] === transfer else { return }
        running[easy] = nil
        _ = curl_multi_remove_handle(multi!, easy)
        transfer.complete(.failure(error))
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        Int(max(1, duration.nanoseconds / 1_000_000))
    }

    /// libcurl's result in the words a user can act on.
    private static func error(_ code: CURLcode, of transfer: CurlTransfer, easy: UnsafeMutableRawPointer) -> HTTPClient.TransferError {
        var osErrno = 0
        _ = ampel_curl_get_long(easy, CURLINFO_OS_ERRNO, &osErrno)
        let system = osErrno != 0 ? String(cString: strerror(Int32(osErrno))).lowercased() : nil
        let detail = String(cString: transfer.errorBuffer)
        let words = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        let host = URL(string: transfer.request.url)?.host ?? transfer.request.url
        let kind: HTTPClient.TransferError.Kind
        let cause: String
        switch code {
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            (kind, cause) = (.unusableURL, "'\(transfer.request.url)' is not a usable URL")
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            (kind, cause) = (.unknownHost, "unknown host \(host)")
        case CURLE_COULDNT_CONNECT:
            (kind, cause) = (.cannotConnect, system ?? words)
        case CURLE_OPERATION_TIMEDOUT:
            var connected: curl_off_t = 0
            _ = ampel_curl_get_off(easy, CURLINFO_CONNECT_TIME_T, &connected)
            if connected == 0 {
                (kind, cause) = (.connectTimeout, "no connection within \(transfer.request.connectTimeout)")
            } else {
                (kind, cause) = (.timeout, "no complete answer within \(transfer.request.timeout ?? .zero)")
            }
        case CURLE_GOT_NOTHING:
            (kind, cause) = (.connectionLost, "the server closed the connection before answering")
        case CURLE_PARTIAL_FILE:
            (kind, cause) = (.connectionLost, "the connection closed before the whole answer arrived")
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR:
            (kind, cause) = (.connectionLost, system ?? words)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE:
            (kind, cause) = (.tls, "TLS: \(words)")
        case CURLE_TOO_MANY_REDIRECTS:
            (kind, cause) = (.other, "more than \(transfer.request.redirects) redirects")
        default:
            (kind, cause) = (.other, words)
        }
        return HTTPClient.TransferError(kind: kind, cause: cause, curlCode: Int(code.rawValue))
    }
}
