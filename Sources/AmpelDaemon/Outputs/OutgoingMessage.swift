import AmpelDomain
import Foundation

/// One message the daemon will publish.
public struct OutgoingMessage: Sendable, Hashable, CustomStringConvertible {
    public var topic: String
    public var payload: [UInt8]
    /// 0 or 1.
    public var qos: Int
    public var retain: Bool
    /// MQTT 5 message expiry (whole seconds); `nil` for none.
    public var expiry: Duration?

    public init(topic: String, payload: [UInt8], qos: Int, retain: Bool, expiry: Duration? = nil) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.expiry = expiry
    }

    public init(topic: String, text: String, qos: Int, retain: Bool, expiry: Duration? = nil) {
        self.init(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain, expiry: expiry)
    }

    /// The payload as text.
    public var text: String { String(decoding: payload, as: UTF8.self) }

    public var description: String { "\(topic) \(retain ? "[retained] " : "")\(text)" }
}

/// JSON for the payloads built with `Codable` (Home Assistant discovery).
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
