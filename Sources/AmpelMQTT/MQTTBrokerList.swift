/// The brokers one client may use: one URL, or the nodes of one cluster in the order they are
/// tried (`mqtt://node1:1883,mqtt://node2:1883`).
///
/// The nodes of a cluster share the client's session, so the client keeps its id and session
/// when it moves from one to the next (``MQTTConfiguration/failover``). The list is checked
/// when it is made:
/// - all `mqtt://` or all `mqtts://`: TLS is set up once per client, and a list that fell
///   back from `mqtts://` to `mqtt://` would send the password in clear to the next node;
/// - credentials, where a URL gives them, the same in every URL (one client, one login); a URL
///   without them uses the others';
/// - no node twice.
public struct MQTTBrokerList: Sendable, Hashable, CustomStringConvertible {
    /// The brokers in the order they are tried; never empty.
    public let urls: [MQTTBrokerURL]

    /// - Throws: ``MQTTError`` with code ``MQTTError/Code/invalidURL`` naming the entry and the problem.
    public init(_ urls: [MQTTBrokerURL]) throws(MQTTError) {
        func bad(_ why: String) -> MQTTError { MQTTError(code: .invalidURL, message: "invalid broker list: \(why)") }
        guard let first = urls.first else { throw bad("no broker given") }
        if let other = urls.first(where: { $0.usesTLS != first.usesTLS }) {
            let (tls, plain) = first.usesTLS ? (first, other) : (other, first)
            throw bad("\(tls) uses TLS and \(plain) does not; every broker of a list is mqtts:// or every one mqtt:// (a node without TLS would get the credentials in clear)")
        }
        let login = urls.first(where: { $0.username != nil })
        if let login, let other = urls.first(where: { $0.username != nil && ($0.username != login.username || $0.password != login.password) }) {
            throw bad("\(login) and \(other) give different credentials; give them once, or the same in every URL")
        }
        var seen: Set<String> = []
        for url in urls where !seen.insert("\(url.host.lowercased()):\(url.port)").inserted {
            throw bad("\(url) is listed twice")
        }
        self.urls = urls.map { url in
            var url = url
            url.username = login?.username
            url.password = login?.password
            return url
        }
    }

    /// One broker.
    public init(_ url: MQTTBrokerURL) {
        urls = [url]
    }

    /// Comma-separated URLs, as `--broker` and `AMPEL_BROKER` take them (spaces around the commas
    /// are ignored).
    /// - Throws: ``MQTTError`` with code ``MQTTError/Code/invalidURL``.
    public init(parsing text: String) throws(MQTTError) {
        var urls: [MQTTBrokerURL] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
            let trimmed = String(part.drop(while: blank).reversed().drop(while: blank).reversed())
            guard !trimmed.isEmpty else {
                throw MQTTError(code: .invalidURL, message: "invalid broker list '\(text)': an empty entry (URLs are separated by single commas)")
            }
            urls.append(try MQTTBrokerURL(trimmed))
        }
        try self.init(urls)
    }

    public var first: MQTTBrokerURL { urls[0] }
    public var usesTLS: Bool { first.usesTLS }
    public var username: String? { first.username }
    public var password: String? { first.password }

    /// The URLs without credentials, comma-separated: for logs.
    public var description: String { urls.map(\.description).joined(separator: ",") }
}
