import ProcessStats

// No Foundation at all: what InternetTime costs on its own.
// Usage: ProbeBare baseline|internettime
let variant = CommandLine.arguments.dropFirst().first ?? "baseline"
var check = ""
if variant == "internettime" {
    let parsed = InternetTime.parse("2020-11-05T10:00:00.250+01:00") ?? -1
    check = InternetTime.format(secondsSince1970: parsed)
}
print("\(variant) \(residentLine()) check=\(check)")
