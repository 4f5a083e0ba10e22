import AmpelDomain
import Hummingbird
import NIOCore

/// JSON answers and the API's errors: `{"error": "<status name>", "reason": "<why>"}`.
enum HTTPResponses {
    static func json(_ bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func text(_ text: String, status: HTTPResponse.Status = .ok, contentType: String = "text/plain; charset=utf-8") -> Response {
        Response(status: status, headers: [.contentType: contentType], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func error(_ status: HTTPResponse.Status, _ reason: String) -> Response {
        var json = JSONWriter(capacity: 128)
        json.raw(#"{"error":"#)
        json.string(status.reasonPhrase)
        json.raw(#","reason":"#)
        json.string(reason)
        json.raw("}")
        return Self.json(json.bytes, status: status)
    }
}

/// An answer that is an error: thrown by a handler, turned into ``HTTPResponses/error(_:_:)``.
struct APIError: Error, HTTPResponseError {
    let status: HTTPResponse.Status
    let reason: String

    init(_ status: HTTPResponse.Status, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    var headers: HTTPFields { [.contentType: "application/json"] }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        HTTPResponses.error(status, reason)
    }
}
