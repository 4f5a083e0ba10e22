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
        case truncatedBody
        /// The full length announced, half the body sent, then the connection closed.
        case connectionCut
        /// The full length announced, half the body sent, then nothing more (the connection stays open).
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
    }

    /// The largest page the server sends, whatever the client asks for.
    public let maxRecordCount: Int
    /// The loopback port the server listens on.
    public let port: Int

    private let state = Mutex(State())
    private let posts = Watched<[Request]>([])
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, port: Int, maxRecordCount: Int) {
        self.group = group
        self.channel = channel
        self.port = port
        self.maxRecordCount = maxRecordCount
    }

    /// Starts a server on a free port of 127.0.0.1.
    ///
    /// - Parameter maxRecordCount: the page size limit; small values force many pages.
    public static func start(maxRecordCount: Int = 2000) async throws -> HTTPFixtureServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let box = ServerBox()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(FixtureHandler(box: box))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            try? await group.shutdownGracefully()
            throw FixtureError("the server channel has no port")
        }
        let server = HTTPFixtureServer(group: group, channel: channel, port: port, maxRecordCount: max(1, maxRecordCount))
        box.server.withLock { $0 = server }
        return server
    }

    /// Closes the listening socket and every open connection.
    public func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
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
    }

    func handle(method: String, uri: String, headers: [String: String], body: [UInt8]) -> Action {
        let components = URLComponents(string: uri)
        var query: [String: String] = [:]
        for item in components?.queryItems ?? [] {
            query[item.name] = item.value ?? ""
        }
        let request = Request(method: method, path: components?.path ?? uri, query: query, userAgent: headers["user-agent"],
                              headers: headers, body: body)
        let (fault, answer, features, ready) = state.withLock { state in
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
            return (fault, state.answer, state.features, ready)
        }
        for continuation in ready { continuation.resume() }
        let action = action(for: request, fault: fault, answer: answer, features: features)
        if method == "POST", !request.path.hasSuffix("/query"), case .respond(200, _, _) = action {
            posts.update { $0.append(request) }
        }
        return action
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
public struct FixtureError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Lets the channel handlers reach the server, which exists only after the bind.
final class ServerBox: Sendable {
    let server = Mutex<HTTPFixtureServer?>(nil)
}

/// Turns each request into the server's answer.
final class FixtureHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let box: ServerBox
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

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
            respond(action, keepAlive: head.isKeepAlive, version: head.version, context: context)
        }
    }

    private func respond(_ action: HTTPFixtureServer.Action, keepAlive: Bool, version: HTTPVersion, context: ChannelHandlerContext) {
        switch action {
        case .stall:
            return
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
            }
        }
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
