import Foundation

/// The rule sets that ship with Ampel.
///
/// `bavaria` (four phases, the default), `bavaria-initial` (three phases, before DARK RED
/// was added on 22 October 2020) and `notbremse-2021` (§ 28b IfSG with its day counts).
/// They are JSON resources of this module.
public enum RuleSetCatalog {
    /// The name used when none is given.
    public static let defaultName = "bavaria"

    /// The names of the bundled rule sets.
    public static let bundledNames = ["bavaria", "bavaria-initial", "notbremse-2021", "krankenhausampel-2021", "hospitalisierung-2021"]

    /// A bundled rule set by name.
    public static func bundled(_ name: String) throws(RuleSetError) -> RuleSet {
        guard bundledNames.contains(name),
              let url = Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "rulesets"),
              let data = try? Data(contentsOf: url)
        else {
            throw RuleSetError(
                ruleSet: name,
                message: "no such bundled rule set (bundled: \(bundledNames.joined(separator: ", ")); or give a path to a JSON file)")
        }
        return try RuleSet.decode(data, name: name)
    }

    /// The default rule set, `bavaria`.
    public static func standard() -> RuleSet {
        // The bundled files are validated by the tests; failing here is a build defect.
        do { return try bundled(defaultName) } catch { fatalError("bundled rule set is invalid: \(error)") }
    }
}
