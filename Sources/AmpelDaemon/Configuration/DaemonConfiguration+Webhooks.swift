import AmpelDomain
import Yams

/// One webhook of `notify.webhooks`: where each alert it wants is POSTed, and in which language.
///
/// See docs/webhooks.md for what the POST carries and how it is retried.
package struct WebhookSettings: Sendable, Hashable {
    /// Which alerts of one kind (device or district) a webhook wants.
    enum Selection: Sendable, Hashable {
        case all
        case none
        /// These device keys, or these five-digit district codes.
        case only(Set<String>)

        func contains(_ key: String) -> Bool {
            switch self {
            case .all: true
            case .none: false
            case .only(let keys): keys.contains(key)
            }
        }
    }

    /// Unique among the webhooks; the key of its counters in `bridge/info` and of its log lines.
    package var name: String
    /// An absolute `http://` or `https://` URL.
    var url: String
    /// Extra request headers in the order given (a token, ntfy's `Title`, `Priority`, `Tags`).
    var headers: [Header]
    /// The language of the alert it receives; `nil`: the alert's own (the device's, or `lang`).
    var language: Language?
    var devices: Selection
    var districts: Selection

    struct Header: Sendable, Hashable {
        var name: String
        var value: String
        init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    init(name: String, url: String, headers: [Header] = [], language: Language? = nil,
                devices: Selection = .all, districts: Selection = .all) {
        self.name = name
        self.url = url
        self.headers = headers
        self.language = language
        self.devices = devices
        self.districts = districts
    }

    /// Whether the webhook wants the alert of device `key`.
    func wants(device key: String) -> Bool { devices.contains(key) }

    /// Whether the webhook wants the alert of district `ags`.
    func wants(district ags: String) -> Bool { districts.contains(ags) }

    /// Headers that frame the request or that Ampel sets itself: a configured one would
    /// corrupt the request or the receiver's deduplication.
    static let reservedHeaders: Set<String> = ["content-length", "transfer-encoding", "host", "connection", "idempotency-key"]
}

extension DaemonConfiguration {
    /// `notify.webhooks`: a list of webhooks, or null/`[]` for none.
    mutating func readWebhooks(_ value: ValueReader) throws(ConfigurationError) {
        if value.isNull { notify.webhooks = []; return }
        guard case .sequence(let sequence) = value.node else {
            throw value.error("expected a list of webhooks (each with at least a url)")
        }
        var names = Set<String>()
        var webhooks: [WebhookSettings] = []
        for (index, item) in sequence.enumerated() {
            let path = "\(value.path)[\(index)]"
            let w = try MappingReader(item, path: path)
            try w.allow(["name", "url", "headers", "language", "devices", "districts"])
            guard let urlValue = w["url"] else { throw ConfigurationError(key: "\(path).url", line: item.mark?.line, message: "missing (an http:// or https:// URL)") }
            let url = try urlValue.convert(Self.httpURL)
            let name = try w["name"]?.nonEmptyString() ?? String(index)
            guard names.insert(name).inserted else {
                throw ConfigurationError(key: "\(path).name", line: (w["name"] ?? urlValue).line, message: "a second webhook named '\(name)'")
            }
            var webhook = WebhookSettings(name: name, url: url)
            if let h = try w.mapping("headers") { webhook.headers = try Self.webhookHeaders(h) }
            if let v = w["language"] { webhook.language = try v.convert(Self.language) }
            // Neither list: every alert. One of them: only alerts of that kind.
            let devices = w["devices"], districts = w["districts"]
            if devices != nil || districts != nil {
                webhook.devices = try devices.map { (v) throws(ConfigurationError) in try Self.selection(v, what: "device key") { DeviceKey.isSafe($0) } } ?? .none
                webhook.districts = try districts.map { (v) throws(ConfigurationError) in
                    try Self.selection(v, what: "five-digit district code (quote it: \"09162\")") { District.isValidCode($0) }
                } ?? .none
            }
            webhooks.append(webhook)
        }
        notify.webhooks = webhooks
    }

    /// `name: value` pairs; names are HTTP tokens, values single lines.
    static func webhookHeaders(_ m: MappingReader) throws(ConfigurationError) -> [WebhookSettings.Header] {
        var headers: [WebhookSettings.Header] = []
        var seen = Set<String>()
        for entry in m.entries {
            guard isHTTPToken(entry.key) else {
                throw ConfigurationError(key: m.child(entry.key), line: entry.keyNode.line,
                                         message: "'\(entry.key)' is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")
            }
            let lower = entry.key.lowercased()
            guard !WebhookSettings.reservedHeaders.contains(lower) else {
                throw ConfigurationError(key: m.child(entry.key), line: entry.keyNode.line, message: "set by Ampel itself, not configurable")
            }
            guard seen.insert(lower).inserted else {
                throw ConfigurationError(key: m.child(entry.key), line: entry.keyNode.line, message: "given twice (header names ignore case)")
            }
            let value = entry.value.isNull ? "" : try entry.value.scalarText()
            guard value.unicodeScalars.allSatisfy({ $0 == "\t" || ($0.value >= 0x20 && $0.value != 0x7F) }) else {
                throw entry.value.error("a header value must be one line without control characters")
            }
            headers.append(.init(name: entry.key, value: value))
        }
        return headers
    }

    /// RFC 9110's `token`: what a header name may consist of.
    static func isHTTPToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): true
            default: Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
            }
        }
    }

    /// `all`, `false`/`[]`/null for none, one key, or a list of keys.
    static func selection(_ value: ValueReader, what: String, valid: (String) -> Bool) throws(ConfigurationError) -> WebhookSettings.Selection {
        if value.isNull { return .none }
        var items: [ValueReader]
        switch value.node {
        case .scalar:
            let text = try value.scalarText()
            if text == "all" { return .all }
            if let flag = try? value.bool(), !flag { return .none }
            items = [value]
        case .sequence(let sequence):
            items = sequence.enumerated().map { ValueReader(node: $1, path: "\(value.path)[\($0)]") }
        default:
            throw value.error("expected all, a \(what) or a list of them")
        }
        var keys = Set<String>()
        for item in items {
            let key = try item.nonEmptyString()
            guard valid(key) else { throw item.error("'\(key)' is not a \(what)") }
            keys.insert(key)
        }
        return keys.isEmpty ? .none : .only(keys)
    }
}
