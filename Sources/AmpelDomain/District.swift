/// A German district (Landkreis or kreisfreie Stadt, for Berlin a Bezirk) as the RKI keys it.
public struct District: Sendable, Hashable, Codable {
    /// The kind of district: the RKI's `SK` (Stadtkreis) and `LK` (Landkreis).
    public enum Kind: String, Sendable, Hashable, Codable {
        /// Kreisfreie Stadt (also Berlin's Bezirke and Hamburg).
        case city = "SK"
        /// Landkreis, Kreis or Regionalverband.
        case county = "LK"
    }

    /// The five-digit Regionalschlüssel (`RS`), e.g. `09162`; equal to the AGS except for
    /// Berlin's Bezirke (11001..11012).
    public let ags: String
    /// The RKI's unambiguous name, e.g. `SK München` (the city) or `LK München`.
    public let name: String
    /// The short name, e.g. `München`.
    public let shortName: String
    public let kind: Kind
    /// The federal state, e.g. `Bayern`.
    public let state: String
    /// Residents, the denominator of the incidence.
    public let population: Int?

    public init(ags: String, name: String, shortName: String, kind: Kind, state: String, population: Int?) {
        self.ags = ags
        self.name = name
        self.shortName = shortName
        self.kind = kind
        self.state = state
        self.population = population
    }

    /// Whether `code` is five ASCII digits.
    public static func isValidCode(_ code: String) -> Bool {
        code.utf8.count == 5 && code.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// The state part of the code: `09` for Bavaria.
    public var stateCode: Substring { ags.prefix(2) }
}

/// A monitored region: the districts whose code starts with a prefix (`09`: Bavaria).
public struct Region: Sendable, Hashable {
    public let prefix: String
    public let name: String

    public init(prefix: String, name: String) {
        self.prefix = prefix
        self.name = name
    }

    public static let bavaria = Region(prefix: "09", name: "Bayern")

    public func contains(ags: String) -> Bool { ags.hasPrefix(prefix) }
}
