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

/// A monitored region: the districts whose code starts with one of a list of prefixes
/// (`09`: Bavaria), or all of Germany. A rule set names its region (`docs/rulesets.md`).
public struct Region: Sendable, Hashable {
    /// Code prefixes of 1 to 5 digits; empty for all of Germany.
    public let prefixes: [String]
    /// What to call the region, e.g. `Bayern`.
    public let name: String

    public init(prefixes: [String], name: String) {
        self.prefixes = prefixes
        self.name = name
    }

    /// One prefix, e.g. `Region(prefix: "09", name: "Bayern")`.
    public init(prefix: String, name: String) {
        self.init(prefixes: [prefix], name: name)
    }

    public static let bavaria = Region(prefixes: ["09"], name: "Bayern")
    public static let germany = Region(prefixes: [], name: "Deutschland")

    /// Whether the region is all of Germany.
    public var isGermany: Bool { prefixes.isEmpty }

    public func contains(ags: String) -> Bool {
        prefixes.isEmpty || prefixes.contains { ags.hasPrefix($0) }
    }

    /// How many districts of the maintained RKI dataset lie in the region (400 for Germany, 96 for Bavaria).
    public var districtCount: Int { DistrictDirectory.germany.districts(in: self).count }
}
