import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A real HTTP server on a loopback port that plays the RKI ArcGIS `query` endpoint.
///
/// It serves a recorded `f=json` answer (``serve(_:)``), pages it by `resultOffset` and
/// `resultRecordCount` (at most ``maxRecordCount`` features per page, with
/// `exceededTransferLimit` while more follow), keeps only the requested `outFields`, counts
/// and records every request, and injects faults into the next requests (``inject(_:times:)``).
/// A test swaps the served answer at any time to simulate a new RKI publication.
///
/// It is a webhook receiver too: a POST to any other path is answered `200` (unless a fault
/// is queued), and recorded with its headers and body in ``delivered``.
///
/// It serves a plain file as well (``serveFile(_:at:etag:lastModified:)``), the way the RKI's
/// GitHub dataset is downloaded: `ETag` and `Last-Modified`, `304 Not Modified` on a
/// conditional GET that matches, the body streamed in 64 KiB writes as the client reads, and
/// the body faults ``Fault/truncatedBody``, ``Fault/connectionCut``, ``Fault/stalledBody``.
///
/// ```swift
/// let server = try await HTTPFixtureServer.start()
/// try server.serve(contentsOf: RecordedRKI.url(day: "2020-11-05"))
/// server.inject(.status(503), times: 1)
/// // ... point the client at server.queryURL ...
/// try await server.shutdown()
/// ```
///
/// > Note: Always call ``shutdown()``: it closes every connection, stalled ones included.
public final class HTTPFixtureServer: Sendable {
    /// What goes wrong with one answer.
    public enum Fault: Sendable, Hashable {
        /// An HTTP error status with a short HTML body.
        case status(Int)
        /// No answer at all: the request is held until the client gives up or the server stops.
        case stall
        /// HTTP 200 with an ArcGIS error body `{"error": {"code": ..., "message": ...}}`.
        case arcgisError(code: Int, message: String)
        /// The first half of the page, framed as the complete body (a cut proxy response).
        /// A served file is cut mid-row: right after the first comma past its middle.
        case truncatedBody
        /// The full length announced, half the body sent, then the connection closed.
        case connectionCut
        /// The full length announced, half the body sent, then nothing more (the connection
        /// stays open until the client closes it or the server stops); see ``stalledBodies``.
        case stalledBody
        /// Every feature's attribute `from` renamed to `to`.
        case renamedField(from: String, to: String)
        /// A page with an empty `features` list.
        case emptyFeatures
        /// Every feature's `last_update` replaced, e.g. by an older day.
        case lastUpdate(String)
        /// One attribute of the feature with `RS` set to a value (e.g. a negative incidence).
        case attribute(rs: String, field: String, value: JSONValue)
        /// Any body with any status.
        case raw(status: Int, body: String)
        /// `302 Found` with `Location: url` and no body, whatever was asked.
        case redirect(to: String)
    }

    /// One request as the server saw it.
    public struct Request: Sendable, Hashable {
        public let method: String
        public let path: String
        /// The decoded query parameters.
        public let query: [String: String]
        public let userAgent: String?
        /// Every header, by lower-cased name (the last one of a name wins).
        public let headers: [String: String]
        public let body: [UInt8]
    }

    struct State {
        var answer: JSONValue?
        var features: [JSONValue] = []
        /// Queued answers; `nil` is a normal answer (to let requests pass before a fault).
        var faults: [(fault: Fault?, remaining: Int)] = []
        var requests: [Request] = []
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        /// The files served, by path; the first served is the one ``fileURL`` names.
        var files: [String: ServedFile] = [:]
        var firstPath: String?
        var fileOK: [String: Int] = [:]
        var fileNotModified: [String: Int] = [:]
    }

    /// The file served by ``serveFile(_:at:etag:lastModified:)``: one buffer that every answer
    /// slices (slices share the storage, so a 45 MB file is not copied per request).
    struct ServedFile {
        let path: String
        let body: ByteBuffer
        let etag: String
        let lastModified: Date?
    }

    /// The largest page the server sends, whatever the client asks for.
    public let maxRecordCount: Int
    /// The loopback port the server listens on.
    public let port: Int

    private let state = Mutex(State())
    private let posts = Watched<[Request]>([])
    private let stalls = Watched<Int>(0)
    private let channel: any Channel
    private let box: ServerBox

    private init(channel: any Channel, box: ServerBox, port: Int, maxRecordCount: Int) {
        self.channel = channel
        self.box = box
        self.port = port
        self.maxRecordCount = maxRecordCount
    }

    /// Starts a server on a free port of 127.0.0.1.
    ///
    /// The servers share one event loop (``eventLoop``) instead of a group each: awaiting a
    /// group's `shutdownGracefully()` hung about one run of the data tests in six (its callback
    /// goes through a global dispatch queue that, with the group's thread gone, sometimes never
    /// ran it). One thread, as each server had before: the handlers share their server's state.
    ///
    /// - Parameter maxRecordCount: the page size limit; small values force many pages.
    public static func start(maxRecordCount: Int = 2000) async throws -> HTTPFixtureServer {
        let box = ServerBox()
        let bootstrap = ServerBootstrap(group: eventLoop)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                box.opened(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(FixtureHandler(box: box))
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw FixtureError("the server channel has no port")
        }
        let server = HTTPFixtureServer(channel: channel, box: box, port: port, maxRecordCount: max(1, maxRecordCount))
        box.server.withLock { $0 = server }
        return server
    }

    /// Every server's loop, for the life of the test process.
    static let eventLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    /// Closes the listening socket and every open connection.
    public func shutdown() async throws {
        try? await channel.close()
        for connection in box.closeAll() { try? await connection.close() }
        let waiters = state.withLock { state in
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.continuation.resume() }
    }

    /// `http://127.0.0.1:<port>`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// The endpoint to give the client: `http://127.0.0.1:<port>/query`.
    public var queryURL: String { baseURL + "/query" }

    // MARK: - What is served

    /// Serves an `f=json` answer from now on (its `features` paged).
    public func serve(_ body: Data) throws {
        let answer = try JSONValue.parse(body)
        guard let features = answer["features"]?.arrayValue else {
            throw FixtureError("the body to serve has no 'features' list")
        }
        state.withLock { state in
            state.answer = answer
            state.features = features
        }
    }

    /// Serves the `f=json` answer in a file from now on.
    public func serve(contentsOf url: URL) throws {
        try serve(Data(contentsOf: url))
    }

    /// Serves `data` at `path` from now on, to GET (and HEAD), replacing any file served before.
    ///
    /// Answers `200` with `Content-Type: text/csv`, `ETag: "<etag>"` and, when given,
    /// `Last-Modified`; `304 Not Modified` (no body) when `If-None-Match` names the current ETag
    /// (or is `*`), or, without `If-None-Match`, when `If-Modified-Since` is at or after
    /// `lastModified`. Queued faults apply as to any request: statuses, ``Fault/stall`` and
    /// ``Fault/raw(status:body:)`` come first; the body faults only act on a `200`; the
    /// ArcGIS-only faults (renamed fields, attributes, ...) are used up without effect.
    ///
    /// - Parameters:
    ///   - path: the URL path, e.g. `/COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.csv`.
    ///   - etag: the entity tag without quotes; `nil` derives one from the content, so another
    ///     content gets another tag and the same content the same tag.
    ///   - lastModified: the `Last-Modified` time (whole seconds count); `nil` sends none.
    public func serveFile(_ data: Data, at path: String = "/landkreise.csv", etag: String? = nil, lastModified: Date? = nil) {
        let file = ServedFile(path: path, body: ByteBuffer(bytes: data), etag: etag ?? Self.contentTag(data),
                              lastModified: lastModified)
        state.withLock {
            $0.files[path] = file
            if $0.firstPath == nil { $0.firstPath = path }
        }
    }

    /// Serves the file at `url` (read once, now) like ``serveFile(_:at:etag:lastModified:)``.
    public func serveFile(contentsOf url: URL, at path: String = "/landkreise.csv", etag: String? = nil,
                          lastModified: Date? = nil) throws {
        serveFile(try Data(contentsOf: url, options: .mappedIfSafe), at: path, etag: etag, lastModified: lastModified)
    }

    /// Stops serving the files: their paths answer `404` again.
    public func stopServingFile() {
        state.withLock {
            $0.files = [:]
            $0.firstPath = nil
        }
    }

    /// The served file's URL, `http://127.0.0.1:<port>/landkreise.csv` (or the path given to
    /// ``serveFile(_:at:etag:lastModified:)``).
    public var fileURL: String { baseURL + (state.withLock { $0.firstPath } ?? "/landkreise.csv") }

    /// The URL of the file served at `path`.
    public func fileURL(at path: String) -> String { baseURL + path }

    /// The served file's ETag without quotes (as the `ETag` header carries it, quoted); `nil`
    /// when no file is served.
    public var fileETag: String? { state.withLock { state in state.firstPath.flatMap { state.files[$0]?.etag } } }

    /// How many `200` answers carried the file (whole, or part of it under a body fault).
    public var fileOKCount: Int { state.withLock { $0.fileOK.values.reduce(0, +) } }

    /// How many `200` answers carried the file at `path`.
    public func fileOKCount(at path: String) -> Int { state.withLock { $0.fileOK[path] ?? 0 } }

    /// How many requests for the file at `path` were answered `304 Not Modified`.
    public func fileNotModifiedCount(at path: String) -> Int { state.withLock { $0.fileNotModified[path] ?? 0 } }

    /// How many requests for the file were answered `304 Not Modified`.
    public var fileNotModifiedCount: Int { state.withLock { $0.fileNotModified.values.reduce(0, +) } }

    /// How many answers are stalled mid-body (``Fault/stalledBody``): headers and part of the
    /// body sent and flushed, the rest withheld. Counted once that part has left the server.
    public var stalledBodies: Int { stalls.value }

    /// Returns once at least `count` answers stalled mid-body (``stalledBodies``).
    public func waitForStalledBodies(_ count: Int) async {
        await stalls.wait { $0 >= count }
    }

    func noteStalledBody() {
        stalls.update { $0 += 1 }
    }

    /// Lets `times` requests fail with `fault`, after any faults already queued and after
    /// `after` normal answers (so that, say, only the third page of an answer fails).
    public func inject(_ fault: Fault, times: Int = 1, after: Int = 0) {
        guard times > 0 else { return }
        state.withLock { state in
            if after > 0 { state.faults.append((nil, after)) }
            state.faults.append((fault, times))
        }
    }

    /// Drops every queued fault.
    public func clearFaults() {
        state.withLock { $0.faults = [] }
    }

    // MARK: - What was asked

    /// How many requests arrived so far.
    public var requestCount: Int { state.withLock { $0.requests.count } }

    /// Every request so far, oldest first.
    public var requests: [Request] { state.withLock { $0.requests } }

    /// The POSTs to a path other than `/query` that were answered `200`, oldest first.
    public var delivered: [Request] { posts.value }

    /// Returns once at least `count` POSTs were answered `200` (``delivered``).
    public func waitForDelivered(_ count: Int) async {
        await posts.wait { $0.count >= count }
    }

    /// Returns once at least `count` requests have arrived (or the server is shut down).
    public func waitForRequests(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.requests.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    // MARK: - Answering

    enum Action {
        case respond(status: Int, contentType: String, body: [UInt8])
        case cut(status: Int, contentType: String, body: [UInt8], close: Bool)
        case stall
        /// `body` written in chunks as the client reads, then `end`; `headers` frame it.
        case stream(status: Int, headers: HTTPHeaders, body: ByteBuffer, end: StreamEnd)
    }

    /// What follows the last byte of a streamed body.
    enum StreamEnd {
        /// The end of the message (the connection kept or closed as the request asked).
        case complete
        /// The connection closed, whatever was announced.
        case close
        /// Nothing: the connection stays open, the message unfinished.
        case hold
    }

    func handle(method: String, uri: String, headers: [String: String], body: [UInt8]) -> Action {
        let components = URLComponents(string: uri)
        var query: [String: String] = [:]
        for item in components?.queryItems ?? [] {
            query[item.name] = item.value ?? ""
        }
        let request = Request(method: method, path: components?.path ?? uri, query: query, userAgent: headers["user-agent"],
                              headers: headers, body: body)
        let (fault, answer, features, file, ready) = state.withLock { state in
            state.requests.append(request)
            let count = state.requests.count
            let ready = state.waiters.filter { $0.count <= count }.map(\.continuation)
            state.waiters.removeAll { $0.count <= count }
            var fault: Fault?
            if !state.faults.isEmpty {
                fault = state.faults[0].fault
                state.faults[0].remaining -= 1
                if state.faults[0].remaining <= 0 { state.faults.removeFirst() }
            }
            return (fault, state.answer, state.features, state.files[request.path], ready)
        }
        for continuation in ready { continuation.resume() }
        let action: Action
        if let file, request.path == file.path, request.method == "GET" || request.method == "HEAD",
           !Self.isEarlyFault(fault) {
            action = fileAction(for: request, fault: fault, file: file)
        } else {
            action = self.action(for: request, fault: fault, answer: answer, features: features)
        }
        if method == "POST", !request.path.hasSuffix("/query"), case .respond(200, _, _) = action {
            posts.update { $0.append(request) }
        }
        return action
    }

    /// The faults that replace any answer, before the path is looked at.
    static func isEarlyFault(_ fault: Fault?) -> Bool {
        switch fault {
        case .status?, .stall?, .arcgisError?, .raw?, .redirect?: return true
        default: return false
        }
    }

    /// The answer to a GET or HEAD of the served file.
    func fileAction(for request: Request, fault: Fault?, file: ServedFile) -> Action {
        var headers = HTTPHeaders()
        headers.add(name: "ETag", value: "\"\(file.etag)\"")
        if let lastModified = file.lastModified {
            headers.add(name: "Last-Modified", value: HTTPDate.format(lastModified))
        }
        if Self.isNotModified(request.headers, file: file) {
            state.withLock { $0.fileNotModified[file.path, default: 0] += 1 }
            return .stream(status: 304, headers: headers, body: ByteBuffer(), end: .complete)
        }
        state.withLock { $0.fileOK[file.path, default: 0] += 1 }
        headers.add(name: "Content-Type", value: "text/csv")
        let size = file.body.readableBytes
        var body = file.body
        var end = StreamEnd.complete
        switch fault {
        case .truncatedBody?:
            body = file.body.getSlice(at: file.body.readerIndex, length: Self.midRowCut(file.body)) ?? ByteBuffer()
        case .connectionCut?:
            body = file.body.getSlice(at: file.body.readerIndex, length: size / 2) ?? ByteBuffer()
            end = .close
        case .stalledBody?:
            body = file.body.getSlice(at: file.body.readerIndex, length: size / 2) ?? ByteBuffer()
            end = .hold
        default:
            break
        }
        // A truncated body is framed as complete; a cut or stalled one announces the whole file.
        headers.add(name: "Content-Length", value: String(end == .complete ? body.readableBytes : size))
        if request.method == "HEAD" { body = ByteBuffer() }
        return .stream(status: 200, headers: headers, body: body, end: end)
    }

    /// Whether a conditional request is answered `304`: `If-None-Match` decides when present
    /// (RFC 9110, 13.2.2), else `If-Modified-Since` against `Last-Modified`.
    static func isNotModified(_ headers: [String: String], file: ServedFile) -> Bool {
        if let match = headers["if-none-match"] {
            return match.split(separator: ",").contains { tag in
                var tag = tag.trimmingCharacters(in: .whitespaces)
                if tag == "*" { return true }
                if tag.hasPrefix("W/") { tag.removeFirst(2) }
                return tag == "\"\(file.etag)\""
            }
        }
        guard let since = headers["if-modified-since"].flatMap(HTTPDate.parse), let lastModified = file.lastModified else {
            return false
        }
        return Int64(lastModified.timeIntervalSince1970.rounded(.down)) <= since
    }

    /// Where a served file is cut for ``Fault/truncatedBody``: just after the first comma past
    /// the middle, so the last row stops mid-way (a cut at a line end would look complete).
    static func midRowCut(_ body: ByteBuffer) -> Int {
        let half = body.readableBytes / 2
        return body.withUnsafeReadableBytes { bytes in
            var index = half
            while index < bytes.count {
                if bytes[index] == UInt8(ascii: ",") { return index + 1 }
                index += 1
            }
            return half
        }
    }

    /// A tag from the content (FNV-1a 64 and the length): equal for equal bytes only, in practice.
    static func contentTag(_ data: Data) -> String {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            for byte in bytes {
                hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            }
        }
        return String(hash, radix: 16) + "-" + String(data.count, radix: 16)
    }

    func action(for request: Request, fault: Fault?, answer: JSONValue?, features: [JSONValue]) -> Action {
        let json = "application/json; charset=utf-8"
        switch fault {
        case .status(let code)?:
            return .respond(status: code, contentType: "text/html", body: Array("<html><body><h1>\(code)</h1></body></html>".utf8))
        case .stall?:
            return .stall
        case .arcgisError(let code, let message)?:
            let body = JSONValue.object(["error": .object([
                "code": .int(code), "message": .string(message), "details": .array([]),
            ])])
            return .respond(status: 200, contentType: json, body: Array(body.data()))
        case .raw(let status, let body)?:
            return .respond(status: status, contentType: json, body: Array(body.utf8))
        case .redirect(let url)?:
            var headers = HTTPHeaders()
            headers.add(name: "Location", value: url)
            headers.add(name: "Content-Length", value: "0")
            return .stream(status: 302, headers: headers, body: ByteBuffer(), end: .complete)
        default:
            break
        }
        guard request.path.hasSuffix("/query") else {
            if request.method == "POST" { return .respond(status: 200, contentType: "text/plain", body: Array("ok\n".utf8)) }
            return .respond(status: 404, contentType: "text/plain", body: Array("not found\n".utf8))
        }
        guard request.query["f"] == "json" else {
            let body = JSONValue.object(["error": .object(["code": .int(400), "message": .string("Invalid or missing input parameters."), "details": .array([.string("'f' must be json")])])])
            return .respond(status: 200, contentType: json, body: Array(body.data()))
        }
        guard var page = answer else {
            return .respond(status: 503, contentType: "text/plain", body: Array("nothing to serve\n".utf8))
        }
        let offset = max(0, Int(request.query["resultOffset"] ?? "") ?? 0)
        let asked = Int(request.query["resultRecordCount"] ?? "") ?? maxRecordCount
        let count = max(0, min(asked, maxRecordCount))
        let start = min(offset, features.count)
        let end = min(start + count, features.count)
        var slice = Array(features[start..<end])
        let fields = request.query["outFields"].map { $0.split(separator: ",").map(String.init) } ?? ["*"]
        if !fields.contains("*") {
            slice = slice.map { feature in
                var feature = feature
                if let attributes = feature["attributes"]?.objectValue {
                    feature["attributes"] = .object(attributes.filter { fields.contains($0.key) })
                }
                return feature
            }
        }
        switch fault {
        case .renamedField(let from, let to)?:
            slice = slice.map { feature in
                var feature = feature
                if var attributes = feature["attributes"]?.objectValue, let value = attributes.removeValue(forKey: from) {
                    attributes[to] = value
                    feature["attributes"] = .object(attributes)
                }
                return feature
            }
        case .emptyFeatures?:
            slice = []
        case .lastUpdate(let text)?:
            slice = slice.map { feature in
                var feature = feature
                feature["attributes"]?["last_update"] = .string(text)
                return feature
            }
        case .attribute(let rs, let field, let value)?:
            slice = slice.map { feature in
                var feature = feature
                if feature["attributes"]?["RS"]?.stringValue == rs {
                    feature["attributes"]?[field] = value
                }
                return feature
            }
        default:
            break
        }
        page["features"] = .array(slice)
        page["exceededTransferLimit"] = (fault != .emptyFeatures && end < features.count) ? .bool(true) : nil
        let body = Array(page.data())
        switch fault {
        case .truncatedBody?:
            return .respond(status: 200, contentType: json, body: Array(body.prefix(body.count / 2)))
        case .connectionCut?:
            return .cut(status: 200, contentType: json, body: body, close: true)
        case .stalledBody?:
            return .cut(status: 200, contentType: json, body: body, close: false)
        default:
            return .respond(status: 200, contentType: json, body: body)
        }
    }
}

/// An error of the fixture itself (not of the code under test).
/// Lets the channel handlers reach the server, which exists only after the bind.
final class ServerBox: Sendable {
    let server = Mutex<HTTPFixtureServer?>(nil)
    /// The open connections, until ``closeAll()``; nil after it (a late one is closed at once).
    private let connections = Mutex<[ObjectIdentifier: any Channel]?>([:])

    func opened(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let kept = connections.withLock { connections -> Bool in
            guard connections != nil else { return false }
            connections![id] = channel
            return true
        }
        guard kept else {
            channel.close(promise: nil)
            return
        }
        channel.closeFuture.whenComplete { _ in _ = self.connections.withLock { $0?.removeValue(forKey: id) } }
    }

    /// The connections open now; any opened later is closed at once.
    func closeAll() -> [any Channel] {
        connections.withLock { connections in
            defer { connections = nil }
            return connections.map { Array($0.values) } ?? []
        }
    }
}

/// Turns each request into the server's answer.
final class FixtureHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The size of each write of a streamed body.
    static let chunkSize = 64 * 1024

    /// A body being streamed: what is left to send and what follows it.
    private struct Outgoing {
        var body: ByteBuffer
        let end: HTTPFixtureServer.StreamEnd
        let keepAlive: Bool
        let server: HTTPFixtureServer
        var lastWrite: EventLoopFuture<Void>?
    }

    private let box: ServerBox
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var outgoing: Outgoing?
    /// Set while ``pump(context:)`` runs: a write can report writability at once, re-entering it.
    private var pumping = false

    init(box: ServerBox) {
        self.box = box
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(let buffer):
            body += buffer.readableBytesView
        case .end:
            guard let head, let server = box.server.withLock({ $0 }) else {
                context.close(promise: nil)
                return
            }
            self.head = nil
            var headers: [String: String] = [:]
            for (name, value) in head.headers { headers[name.lowercased()] = value }
            let action = server.handle(method: head.method.rawValue, uri: head.uri, headers: headers, body: body)
            body = []
            respond(action, keepAlive: head.isKeepAlive, version: head.version, server: server, context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump(context: context) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        outgoing = nil
        context.fireChannelInactive()
    }

    private func respond(_ action: HTTPFixtureServer.Action, keepAlive: Bool, version: HTTPVersion,
                         server: HTTPFixtureServer, context: ChannelHandlerContext) {
        switch action {
        case .stall:
            return
        case .stream(let status, var headers, let body, let end):
            if end == .complete { headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close") }
            let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: status), headers: headers)
            let written = context.writeAndFlush(wrapOutboundOut(.head(head)))
            outgoing = Outgoing(body: body, end: end, keepAlive: keepAlive, server: server, lastWrite: written)
            pump(context: context)
        case .respond(let status, let contentType, let body):
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: contentType)
            headers.add(name: "Content-Length", value: String(body.count))
            headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
            let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: status), headers: headers)
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            if keepAlive {
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            } else {
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                    loopBound.value.close(promise: nil)
                }
            }
        case .cut(let status, let contentType, let body, let close):
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: contentType)
            headers.add(name: "Content-Length", value: String(body.count))
            let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: status), headers: headers)
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            let half = Array(body.prefix(body.count / 2))
            let sent = context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: half)))))
            if close {
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                sent.whenComplete { _ in loopBound.value.close(promise: nil) }
            } else {
                sent.whenSuccess { server.noteStalledBody() }
            }
        }
    }

    /// Writes chunks of the outgoing body while the channel takes them; the rest goes when it
    /// becomes writable again (``channelWritabilityChanged(context:)``), so a slow client
    /// holds back the server instead of the whole file piling up in memory.
    private func pump(context: ChannelHandlerContext) {
        guard !pumping else { return }
        pumping = true
        defer { pumping = false }
        while context.channel.isActive, context.channel.isWritable, var current = outgoing, current.body.readableBytes > 0 {
            let chunk = current.body.readSlice(length: min(Self.chunkSize, current.body.readableBytes))!
            outgoing = current
            // The write first: when the client is gone it fails at once and `channelInactive`
            // clears `outgoing` inside it (written as `outgoing?.lastWrite = write(...)`, that
            // was an overlapping access, and a crash).
            let written = context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk))))
            outgoing?.lastWrite = written
        }
        guard let current = outgoing, current.body.readableBytes == 0 else { return }
        outgoing = nil
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        switch current.end {
        case .complete:
            let ended = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !current.keepAlive {
                ended.whenComplete { _ in loopBound.value.close(promise: nil) }
            }
        case .close:
            // Closing at once would drop writes still queued; close after the last one left.
            let last = current.lastWrite ?? context.eventLoop.makeSucceededVoidFuture()
            last.whenComplete { _ in loopBound.value.close(promise: nil) }
        case .hold:
            let server = current.server
            let last = current.lastWrite ?? context.eventLoop.makeSucceededVoidFuture()
            last.whenSuccess { server.noteStalledBody() }
        }
    }
}

/// HTTP dates (IMF-fixdate, RFC 9110 5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`, in UTC.
enum HTTPDate {
    static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `date` as an HTTP date (fractions of a second dropped).
    static func format(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let time = Int(seconds - Int64(days) * 86_400)
        let (year, month, day) = CivilDay.civil(days)
        // 1970-01-01 was a Thursday.
        let weekday = weekdays[((days % 7) + 7 + 4) % 7]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
        return "\(weekday), \(two(day)) \(months[month - 1]) \(year) \(two(time / 3600)):\(two(time / 60 % 60)):\(two(time % 60)) GMT"
    }

    /// Seconds since 1970 of an IMF-fixdate; `nil` for anything else.
    static func parse(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]),
              let month = months.firstIndex(where: { $0 == parts[2] }) else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (1...CivilDay.daysIn(month: month + 1, year: year)).contains(day),
              (0..<24).contains(clock[0]), (0..<60).contains(clock[1]), (0...60).contains(clock[2]) else { return nil }
        let days = Int64(CivilDay.days(year: year, month: month + 1, day: day))
        return days * 86_400 + Int64(clock[0] * 3600 + clock[1] * 60 + clock[2])
    }
}

/// The recorded RKI answers in the repository.
public enum RecordedRKI {
    /// The days recorded: `2020-10-15`, `2020-11-05`, `2020-11-23`.
    public static let days = ["2020-10-15", "2020-11-05", "2020-11-23"]

    /// The recorded `f=json` answer of the RKI layer on `day` (all 412 districts).
    public static func url(day: String) -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Sources/AmpelData/Resources/rki/landkreisdaten_\(day).json").standardizedFileURL
    }
}
