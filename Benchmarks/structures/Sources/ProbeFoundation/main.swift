import Foundation
import ProcessStats

// Foundation linked, as the daemon links it today (StateStore, Payloads, ... import it).
// Usage: ProbeFoundation baseline|internettime|formatstyle|formatter
let variant = CommandLine.arguments.dropFirst().first ?? "baseline"
let text = "2020-11-05T10:00:00.250+01:00"
var check = ""
switch variant {
case "internettime":
    check = InternetTime.format(secondsSince1970: InternetTime.parse(text) ?? -1)
case "formatstyle":
    let parsed = (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)) ?? Date(timeIntervalSince1970: -1)
    check = Date.ISO8601FormatStyle().format(parsed)
case "formatter":
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    let parsed = formatter.date(from: text) ?? Date(timeIntervalSince1970: -1)
    check = ISO8601DateFormatter().string(from: parsed)
default:
    break
}
print("\(variant) \(residentLine()) check=\(check)")
