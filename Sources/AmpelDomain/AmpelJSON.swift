import Foundation

/// JSON as Ampel writes it everywhere (CLI, MQTT payloads, state files): sorted keys, no
/// escaped slashes, so equal values give equal bytes and retained messages can be compared.
public enum AmpelJSON {
    public static func encoder(pretty: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty
            ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
            : [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .throw
        return encoder
    }

    public static func data<T: Encodable>(_ value: T, pretty: Bool = false) throws -> Data {
        try encoder(pretty: pretty).encode(value)
    }

    public static func string<T: Encodable>(_ value: T, pretty: Bool = false) throws -> String {
        String(decoding: try data(value, pretty: pretty), as: UTF8.self)
    }
}
