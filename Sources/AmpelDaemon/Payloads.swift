import AmpelDomain
import Foundation

/// One message the daemon will publish.
public struct OutgoingMessage: Sendable, Hashable, CustomStringConvertible {
    public var topic: String
    public var payload: [UInt8]
    /// 0 or 1.
    public var qos: Int
    public var retain: Bool
    /// MQTT 5 message expiry in seconds; `nil` for none.
    public var expiry: UInt32?

    public init(topic: String, payload: [UInt8], qos: Int, retain: Bool, expiry: UInt32? = nil) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.expiry = expiry
    }

    public init(topic: String, text: String, qos: Int, retain: Bool, expiry: UInt32? = nil) {
        self.init(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain, expiry: expiry)
    }

    /// The payload as text.
    public var text: String { String(decoding: payload, as: UTF8.self) }

    public var description: String { "\(topic) \(retain ? "[retained] " : "")\(text)" }
}

/// `ampel/bridge/state`: `{"state":"online"}`, and the Will `{"state":"offline"}`.
public enum BridgeState {
    public static let online = #"{"state":"online"}"#
    public static let offline = #"{"state":"offline"}"#
}

/// `ampel/bridge/info`: what the daemon runs on and how it fares.
public struct BridgeInfo: Codable, Sendable, Hashable {
    public var version: String
    public var ruleSet: String
    public var source: String
    public var dataDate: String
    /// ISO 8601 time of the last fetch attempt, `null` before the first.
    public var lastFetch: String?
    public var lastError: String?
    public var stale: Bool
    public var devices: Int
    public var counters: Counters

    public init(version: String, ruleSet: String, source: String, dataDate: String, lastFetch: String?, lastError: String?, stale: Bool, devices: Int, counters: Counters) {
        self.version = version
        self.ruleSet = ruleSet
        self.source = source
        self.dataDate = dataDate
        self.lastFetch = lastFetch
        self.lastError = lastError
        self.stale = stale
        self.devices = devices
        self.counters = counters
    }

    enum CodingKeys: String, CodingKey {
        case version, ruleSet, source, dataDate, lastFetch, lastError, stale, devices, counters
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(version, forKey: .version)
        try c.encode(ruleSet, forKey: .ruleSet)
        try c.encode(source, forKey: .source)
        try c.encode(dataDate, forKey: .dataDate)
        try c.encode(lastFetch, forKey: .lastFetch)
        try c.encode(lastError, forKey: .lastError)
        try c.encode(stale, forKey: .stale)
        try c.encode(devices, forKey: .devices)
        try c.encode(counters, forKey: .counters)
    }
}

/// What the daemon has seen, by kind: the numbers in `ampel/bridge/info`.
public struct Counters: Codable, Sendable, Hashable {
    /// Fixes accepted, by input kind.
    public var accepted: [String: Int] = [:]
    /// Messages skipped by type (OwnTracks `lwt`, `transition`, …).
    public var skipped: [String: Int] = [:]
    /// Bad payloads, by ``DropReason``.
    public var dropped: [String: Int] = [:]
    public var alerts = 0
    public var published = 0
    public var publishFailures = 0
    public var datasetsApplied = 0
    public var datasetsRejected = 0

    public init() {}

    public var droppedTotal: Int { dropped.values.reduce(0, +) }
    public var acceptedTotal: Int { accepted.values.reduce(0, +) }
}

enum Encode {
    /// Sorted-key JSON bytes; the types here hold only finite numbers, so this cannot fail in practice.
    static func json(_ value: some Encodable) -> [UInt8] {
        do {
            return Array(try AmpelJSON.data(value))
        } catch {
            return Array(#"{"error":"encoding failed"}"#.utf8)
        }
    }
}
