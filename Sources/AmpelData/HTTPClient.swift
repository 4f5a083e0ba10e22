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
