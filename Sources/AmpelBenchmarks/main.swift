// ampel-bench: one executable for all benchmark areas; the first argument picks the area.
// Each area lives in its own files (MQTT*.swift, Geo*.swift, Daemon*.swift, Journal*.swift). Run in release via
// Benchmarks/<area>/run.sh.
let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "mqtt":
    await MQTTBenchmark.main(Array(arguments.dropFirst()))
case "geo":
    GeoBenchmark.main(Array(arguments.dropFirst()))
case "daemon":
    await DaemonBenchmark.main(Array(arguments.dropFirst()))
case "journal":
    JournalBenchmark.main(Array(arguments.dropFirst()))
case "rki":
    RKIBenchmark.main(Array(arguments.dropFirst()))
default:
    print("usage: AmpelBenchmarks <area> [arguments] (areas: mqtt, geo, daemon, journal, rki); see Benchmarks/<area>/run.sh")
}
