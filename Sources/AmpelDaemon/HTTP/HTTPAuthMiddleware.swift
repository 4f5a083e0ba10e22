import Foundation
import Hummingbird

/// Asks every request for the configured credentials: `Authorization: Bearer <token>` or
/// `Authorization: Basic <base64(user:password)>`; 401 with a challenge otherwise.
struct HTTPAuthMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext
    let auth: DaemonConfiguration.HTTPAuth
    /// The credentials as a request's are compared with, made once rather than per request.
    private let token: [UInt8]?
    private let basic: [UInt8]?

    init(auth: DaemonConfiguration.HTTPAuth) {
        self.auth = auth
        token = auth.token.map { Array($0.utf8) }
        basic = auth.basic.map { Array("\($0.username):\($0.password)".utf8) }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard accepts(request.headers[.authorization]) else {
            var response = HTTPResponses.error(.unauthorized, "credentials required: Authorization: Bearer <token> or Basic")
            response.headers[.wwwAuthenticate] = basic != nil ? #"Basic realm="ampel""# : #"Bearer realm="ampel""#
            return response
        }
        return try await next(request, context)
    }

    func accepts(_ header: String?) -> Bool {
        guard let header, let space = header.firstIndex(of: " ") else { return false }
        let scheme = header[..<space].lowercased()
        let value = header[header.index(after: space)...].trimmingCharacters(in: .whitespaces)
        switch scheme {
        case "bearer":
            guard let token else { return false }
            return Self.equal(Array(value.utf8), token)
        case "basic":
            guard let basic, let decoded = Data(base64Encoded: value) else { return false }
            return Self.equal(Array(decoded), basic)
        default:
            return false
        }
    }

    /// Compares in time that depends on the length only, so a guess learns nothing from how
    /// long the answer took.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
