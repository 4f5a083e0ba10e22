/// A language Ampel speaks: German or English.
///
/// Every rule set must carry every text in both. Any other requested language falls back
/// to English, the language most visitors to Bavaria can read.
public enum Language: String, Sendable, Hashable, CaseIterable, Codable {
    case de
    case en

    /// The language for a request such as `de`, `de-AT`, `de_DE.UTF-8` or `fr`; unknown
    /// or empty requests fall back to ``en``.
    public init(requested: String?) {
        guard let requested, !requested.isEmpty else {
            self = .en
            return
        }
        let primary = requested
            .split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == "." || $0 == "@" })
            .first
            .map { $0.lowercased() } ?? ""
        self = Language(rawValue: primary) ?? .en
    }

    /// The language for a request such as `de`, `de-AT` or `en_GB.UTF-8` when its primary
    /// subtag is one Ampel speaks; `nil` for anything else (`fr`, empty, `C`).
    public init?(known requested: String) {
        let primary = requested
            .split(omittingEmptySubsequences: false, whereSeparator: { $0 == "_" || $0 == "-" || $0 == "." || $0 == "@" })
            .first.map { $0.lowercased() } ?? ""
        guard let language = Language(rawValue: primary) else { return nil }
        self = language
    }

    /// The language a POSIX environment asks for: `LC_ALL` wins over `LC_MESSAGES`, which
    /// wins over `LANG`; `C`/`POSIX` and unset mean the fallback.
    ///
    /// - Parameter environment: the process environment (passed in, so this stays pure).
    public init(environment: [String: String]) {
        for key in ["LC_ALL", "LC_MESSAGES", "LANG"] {
            if let value = environment[key], !value.isEmpty {
                self.init(requested: value)
                return
            }
        }
        self = .en
    }
}

/// A text in every language of a rule set.
public struct LocalizedText: Sendable, Hashable, Codable {
    public var values: [Language: String]

    public init(_ values: [Language: String]) {
        self.values = values
    }

    /// The text in `language`, else in English, else any.
    public func callAsFunction(_ language: Language) -> String {
        values[language] ?? values[.en] ?? values.values.first ?? ""
    }

    public init(from decoder: any Decoder) throws {
        let raw = try [String: String](from: decoder)
        values = try LocalizedText.keyed(raw, decoder.codingPath)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Dictionary(uniqueKeysWithValues: values.map { ($0.key.rawValue, $0.value) }))
    }

    static func keyed<Value>(_ raw: [String: Value], _ path: [any CodingKey]) throws -> [Language: Value] {
        var result: [Language: Value] = [:]
        for (key, value) in raw {
            guard let language = Language(rawValue: key) else {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: path, debugDescription: "unknown language '\(key)' (known: de, en)"))
            }
            result[language] = value
        }
        return result
    }
}

/// A list of texts (rules, advice) in every language of a rule set.
public struct LocalizedList: Sendable, Hashable, Codable {
    public var values: [Language: [String]]

    public init(_ values: [Language: [String]]) {
        self.values = values
    }

    /// The list in `language`, else in English.
    public func callAsFunction(_ language: Language) -> [String] {
        values[language] ?? values[.en] ?? []
    }

    public init(from decoder: any Decoder) throws {
        let raw = try [String: [String]](from: decoder)
        values = try LocalizedText.keyed(raw, decoder.codingPath)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Dictionary(uniqueKeysWithValues: values.map { ($0.key.rawValue, $0.value) }))
    }
}
