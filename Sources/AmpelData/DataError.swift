/// Why incidence data was rejected or is not available.
///
/// The `reason` is a stable, machine-readable key (used as a counter label and in logs);
/// the message says what was wrong in words a user can act on.
public struct DataError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Reason: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let http = Reason(rawValue: "http")
        public static let timeout = Reason(rawValue: "timeout")
        public static let network = Reason(rawValue: "network")
        public static let apiError = Reason(rawValue: "api-error")
        public static let malformed = Reason(rawValue: "malformed")
        public static let missingField = Reason(rawValue: "missing-field")
        public static let invalidValue = Reason(rawValue: "invalid-value")
        public static let duplicateDistrict = Reason(rawValue: "duplicate-district")
        public static let missingDistricts = Reason(rawValue: "missing-districts")
        public static let empty = Reason(rawValue: "empty")
        public static let outdated = Reason(rawValue: "outdated")
        public static let notAvailable = Reason(rawValue: "not-available")
        public static let io = Reason(rawValue: "io")
        /// A publication held back as a possible wrong release (``ReleaseGuard``).
        public static let implausible = Reason(rawValue: "implausible")
    }

    public let reason: Reason
    public let message: String

    public init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }

    public var description: String { message }
}
