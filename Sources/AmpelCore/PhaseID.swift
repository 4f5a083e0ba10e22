/// The identifier of a traffic-light phase.
///
/// The set of ids is closed: rule sets choose which of them they use and with which bounds,
/// but a rule set cannot invent a new id, so that every lamp, display and Home Assistant
/// sensor knows every value it can receive. The raw values order the phases from the
/// mildest to the strictest.
///
/// This type belongs to the Embedded Swift core: no Foundation, no existentials.
public enum PhaseID: UInt8, Sendable, Hashable, CaseIterable, Comparable {
    case green = 0
    case yellow = 1
    case red = 2
    case darkred = 3

    /// The wire name: `green`, `yellow`, `red` or `darkred`.
    public var name: StaticString {
        switch self {
        case .green: "green"
        case .yellow: "yellow"
        case .red: "red"
        case .darkred: "darkred"
        }
    }

    /// The wire name as a `String`.
    public var id: String {
        switch self {
        case .green: "green"
        case .yellow: "yellow"
        case .red: "red"
        case .darkred: "darkred"
        }
    }

    /// Parses a wire name from its UTF-8 bytes; exact and case-sensitive.
    ///
    /// Anything else, including surrounding white space, answers `nil`.
    public init?<Bytes: Collection>(utf8 bytes: Bytes) where Bytes.Element == UInt8 {
        for candidate in PhaseID.allCases where bytesEqual(bytes, candidate.name) {
            self = candidate
            return
        }
        return nil
    }

    /// Parses a wire name.
    public init?(_ string: String) {
        self.init(utf8: string.utf8)
    }

    public static func < (lhs: PhaseID, rhs: PhaseID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The state name a signal carries when a position lies outside the monitored region.
///
/// It is not a phase: no rule set can give it bounds.
public enum OutsideMarker {
    public static let name: StaticString = "outside"
    public static let id = "outside"

    /// Whether `bytes` spell `outside`.
    public static func matches<Bytes: Collection>(utf8 bytes: Bytes) -> Bool where Bytes.Element == UInt8 {
        bytesEqual(bytes, name)
    }
}

/// Compares a byte collection with a static string, byte by byte.
@inlinable
func bytesEqual<Bytes: Collection>(_ bytes: Bytes, _ literal: StaticString) -> Bool where Bytes.Element == UInt8 {
    guard bytes.count == literal.utf8CodeUnitCount else { return false }
    var index = 0
    let start = literal.utf8Start
    for byte in bytes {
        if byte != start[index] { return false }
        index += 1
    }
    return true
}
