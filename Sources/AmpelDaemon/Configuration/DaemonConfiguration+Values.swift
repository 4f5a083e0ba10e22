import AmpelData
import AmpelDomain
import AmpelMQTT
import Foundation
import Logging

// The value parsers: one text in, one typed value or a ``ConfigurationError/Problem`` out.
// The YAML reader and the flags and variables share them, so `10m` means the same in the file
// and in `--refresh`, and a bad value reads the same wherever it was given.

extension DaemonConfiguration {
    /// One URL, or the nodes of a cluster comma-separated (`--broker`, `AMPEL_BROKER`).
    static func broker(_ text: String) throws(ConfigurationError.Problem) -> MQTTBrokerList {
        do {
            return try MQTTBrokerList(parsing: text)
        } catch {
            throw .init(error.message)
        }
    }

    static func logLevel(_ text: String) throws(ConfigurationError.Problem) -> Logger.Level {
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
            throw .init("'\(text)' is not a log level (\(names))")
        }
        return level
    }

    static func protocolVersion(_ text: String) throws(ConfigurationError.Problem) -> MQTTConfiguration.ProtocolVersion {
        switch text {
        case "5", "5.0": return .v5
        case "3.1.1", "311": return .v311
        default: throw .init("'\(text)' is not an MQTT protocol version (5 or 3.1.1)")
        }
    }

    static func language(_ text: String) throws(ConfigurationError.Problem) -> Language {
        let primary = text.split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == "." }).first.map { $0.lowercased() } ?? ""
        guard let language = Language(rawValue: primary) else { throw .init("'\(text)' is not a language Ampel speaks (de, en)") }
        return language
    }

    static func dataSource(_ text: String) throws(ConfigurationError.Problem) -> DataSource {
        guard let source = DataSource(rawValue: text.lowercased()) else {
            throw .init("'\(text)' is not a data source (\(DataSource.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        return source
    }

    static func day(_ text: String) throws(ConfigurationError.Problem) -> Day {
        guard let day = Day(iso: text) else { throw .init("'\(text)' is not a day as YYYY-MM-DD") }
        return day
    }

    /// An `http(s)://` URL or a `file://` path, for `data.url`.
    static func dataURL(_ text: String) throws(ConfigurationError.Problem) -> String {
        if RKIDatasetClient.isValidURL(text) { return text }
        throw .init("'\(text)' is not an http://, https:// or file:// URL")
    }

    /// `data.guard_factor`: a factor above 1, or `false` to hold nothing back.
    static func guardFactor(_ text: String) throws(ConfigurationError.Problem) -> Double {
        if text.lowercased() == "false" { return .infinity }
        guard let value = Double(text), value.isFinite, value > 1 else { throw .init("'\(text)' is not a factor above 1 (or false)") }
        return value
    }

    /// `data.guard_share`: the share of districts, above 0 and below 1.
    static func guardShare(_ text: String) throws(ConfigurationError.Problem) -> Double {
        guard let value = Double(text), value > 0, value < 1 else { throw .init("'\(text)' is not a share between 0 and 1 (e.g. 0.5)") }
        return value
    }

    static func httpURL(_ text: String) throws(ConfigurationError.Problem) -> String {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              url.host?.isEmpty == false else {
            throw .init("'\(text)' is not an http:// or https:// URL")
        }
        return text
    }

    /// A duration (`60s`, `2m`, `0`) or a number of fixes (`3 fixes`, `1 fix`), for `alerts.min_dwell`.
    static func dwell(_ text: String) throws(ConfigurationError.Problem) -> Dwell {
        let words = text.lowercased().split(separator: " ", omittingEmptySubsequences: true)
        if words.count == 2, words[1] == "fixes" || words[1] == "fix" {
            guard words[0].allSatisfy(\.isASCII), let count = Int(words[0]), (0...1_000_000).contains(count) else {
                throw .init("'\(text)' is not a number of fixes from 0 to 1000000 (3 fixes)")
            }
            return .fixes(count)
        }
        do {
            return .seconds(Int(try duration(text).components.seconds))
        } catch {
            throw .init("'\(text)' is neither a duration (60s, 2m) nor a number of fixes (3 fixes)")
        }
    }

    /// Whole seconds, or a number with `s`, `m`, `h` or `d`: `600`, `10m`, `48h`; at most 100 years.
    ///
    /// - Parameter minimum: the shortest accepted duration in seconds (`keepalive` needs 5).
    static func duration(_ text: String, minimum: Int = 0) throws(ConfigurationError.Problem) -> Duration {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        var digits = Substring(trimmed)
        var factor = 1
        if let unit = trimmed.last, !unit.isNumber {
            switch unit {
            case "s": factor = 1
            case "m": factor = 60
            case "h": factor = 3600
            case "d": factor = 86_400
            default: throw .init("'\(text)' is not a duration (seconds, or a number with s, m, h or d: 10m)")
            }
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
              let value = Int(digits), value <= 100 * 366 * 86_400 / factor else {
            throw .init("'\(text)' is not a duration (seconds, or a number with s, m, h or d: 10m)")
        }
        guard value * factor >= minimum else { throw .init("'\(text)' is shorter than \(minimum) s") }
        return .seconds(value * factor)
    }
}

extension MQTTConfiguration.ProtocolVersion {
    /// The version as the configuration writes it (`5`, `3.1.1`).
    var configurationName: String {
        switch self {
        case .v5: "5"
        case .v311: "3.1.1"
        }
    }
}
