import AmpelDomain
import Foundation

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
