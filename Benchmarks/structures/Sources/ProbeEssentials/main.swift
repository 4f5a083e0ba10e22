import FoundationEssentials
import ProcessStats

// FoundationEssentials only, as a daemon without `import Foundation` would link it.
// Usage: ProbeEssentials baseline|formatstyle
let variant = CommandLine.arguments.dropFirst().first ?? "baseline"
var check = ""
if variant == "formatstyle" {
    let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    let parsed = (try? style.parse("2020-11-05T10:00:00.250+01:00")) ?? Date(timeIntervalSince1970: -1)
    check = Date.ISO8601FormatStyle().format(parsed)
}
print("\(variant) \(residentLine()) check=\(check)")
