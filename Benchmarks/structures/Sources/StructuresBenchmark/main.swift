import Foundation
import OrderedCollections
import ProcessStats

// StructuresBenchmark maps RUNS                      both maps at 100,000 and 1,000,000 entries, medians of RUNS rounds
// StructuresBenchmark map-rss compact|ordered COUNT  VmRSS before and after building one map (run.sh: a process each)
// StructuresBenchmark times RUNS                     format and parse per second of the three time formatters
// StructuresBenchmark accepts                        what each parser makes of InternetTime's inputs
// Prints Markdown; every speed is also given as a ratio to the shipped structure measured in the same round.

/// The layout of `DeviceTable.Entry` (32 bytes), the value the daemon keeps per device.
struct Entry {
    var lat: Double, lon: Double, tst: Int
    var district: UInt16, phase: UInt16, dataDate: UInt16, lang: UInt8, stale: Bool

    init(_ i: Int) {
        (lat, lon, tst) = (47 + Double(i % 1000) * 0.006, 6 + Double(i % 997) * 0.009, 1_604_570_400 + i)
        (district, phase, dataDate, lang, stale) = (UInt16(i % 430), 1, 2, 1, false)
    }
}

protocol StringMap {
    init()
    subscript(key: String) -> Entry? { get set }
}
extension CompactMap: StringMap where Value == Entry {}
extension OrderedDictionary: StringMap where Key == String, Value == Entry {}

/// An OwnTracks-like `user/device` key, 17 bytes: too long for a small string, as most real keys.
func deviceKey(_ i: Int) -> String { "user\(1_000_000 + i)/phone" }
func missingKey(_ i: Int) -> String { "user\(1_000_000 + i)/watch" }

struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func seconds(_ body: () -> Void) -> Double {
    let start = ContinuousClock.now
    body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// Keeps results alive so the optimiser cannot drop the work.
@inline(never) func consume(_ value: Int) { if value == 42 { print("") } }

func mib(_ bytes: Double) -> String { String(format: "%.2f MiB", bytes / 1_048_576) }
func ratio(_ value: Double, _ reference: Double) -> String { String(format: "%.2f", value / reference) }

// MARK: Maps

struct MapFigures {
    var build = 0.0, hitsPerSecond = 0.0, missesPerSecond = 0.0, updateCopy = 0.0, insertCopy = 0.0
    var heap = 0.0, updateBytes = 0.0, insertBytes = 0.0
}

func measure<Map: StringMap>(_: Map.Type, keys: [String], hits: [String], misses: [String]) -> MapFigures {
    var figures = MapFigures()
    let before = heapBytes()
    var map = Map()
    figures.build = seconds { for (i, key) in keys.enumerated() { map[key] = Entry(i) } }
    figures.heap = Double(heapBytes() - before)
    var sum = 0
    figures.hitsPerSecond = Double(hits.count) / seconds { for key in hits { sum &+= map[key]?.tst ?? 0 } }
    figures.missesPerSecond = Double(misses.count) / seconds { for key in misses where map[key] != nil { sum &+= 1 } }
    // The state writer holds a copy of the table; the next location then copies what it changes.
    func change(_ body: () -> Void) -> (Double, Double) {
        let snapshot = map
        return withExtendedLifetime(snapshot) {
            let mark = heapBytes()
            let time = seconds(body)
            return (time, Double(heapBytes() - mark))
        }
    }
    (figures.updateCopy, figures.updateBytes) = change { map[hits[0]] = Entry(keys.count) }
    (figures.insertCopy, figures.insertBytes) = change { map[misses[0]] = Entry(keys.count + 1) }
    consume(sum &+ (map[misses[0]]?.tst ?? 0))
    return figures
}

func maps(runs: Int) {
    print("| entries | measure | CompactMap | OrderedDictionary | OrderedDictionary / CompactMap |")
    print("|---|---|---|---|---|")
    for count in [100_000, 1_000_000] {
        let mark = heapBytes()
        let keys = (0..<count).map(deviceKey)
        let keyStrings = Double(heapBytes() - mark - keys.capacity * MemoryLayout<String>.stride)
        var random = SplitMix64(state: UInt64(count))
        // Lookups with keys built anew (as from a message), in random order.
        let order = (0..<count).shuffled(using: &random)
        let hits = order.map(deviceKey)
        let misses = order.map(missingKey)
        var ours: [MapFigures] = [], theirs: [MapFigures] = []
        for round in 0..<runs {
            if round % 2 == 0 {
                ours.append(measure(CompactMap<Entry>.self, keys: keys, hits: hits, misses: misses))
                theirs.append(measure(OrderedDictionary<String, Entry>.self, keys: keys, hits: hits, misses: misses))
            } else {
                theirs.append(measure(OrderedDictionary<String, Entry>.self, keys: keys, hits: hits, misses: misses))
                ours.append(measure(CompactMap<Entry>.self, keys: keys, hits: hits, misses: misses))
            }
        }
        func row(_ name: String, _ field: KeyPath<MapFigures, Double>, _ show: (Double) -> String) {
            let (a, b) = (median(ours.map { $0[keyPath: field] }), median(theirs.map { $0[keyPath: field] }))
            print("| \(count) | \(name) | \(show(a)) | \(show(b)) | \(ratio(b, a)) |")
        }
        let ms = { (value: Double) in String(format: "%.2f ms", value * 1000) }
        let perSecond = { (value: Double) in String(format: "%.2f M/s", value / 1e6) }
        row("build (insert all)", \.build, ms)
        row("lookups, hits", \.hitsPerSecond, perSecond)
        row("lookups, misses", \.missesPerSecond, perSecond)
        row("heap of the map (malloc)", \.heap) { "\(mib($0)) (\(Int($0) / count) B/entry)" }
        row("copy-on-write: update one value", \.updateCopy, ms)
        row("  bytes copied", \.updateBytes, mib)
        row("copy-on-write: insert one key", \.insertCopy, ms)
        row("  bytes copied", \.insertBytes, mib)
        print("| \(count) | key strings (same in both, not above) | \(mib(keyStrings)) | \(mib(keyStrings)) | 1.00 |")
    }
}

/// VmRSS of a fresh process before and after building one map (keys made before the first reading).
func mapResident(_ variant: String, count: Int) {
    let keys = (0..<count).map(deviceKey)
    let before = statusKiB("VmRSS")
    var sum = 0
    switch variant {
    case "compact":
        var map = CompactMap<Entry>()
        for (i, key) in keys.enumerated() { map[key] = Entry(i) }
        sum = map.count
        print("\(variant) \(count) rssBefore=\(before) rssAfter=\(statusKiB("VmRSS")) delta=\(statusKiB("VmRSS") - before)")
    default:
        var map = OrderedDictionary<String, Entry>()
        for (i, key) in keys.enumerated() { map[key] = Entry(i) }
        sum = map.count
        print("\(variant) \(count) rssBefore=\(before) rssAfter=\(statusKiB("VmRSS")) delta=\(statusKiB("VmRSS") - before)")
    }
    consume(sum)
}

// MARK: Time formats

func makeFractionFormatter() -> ISO8601DateFormatter {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter
}

func times(runs: Int) {
    let count = 100_000
    var random = SplitMix64(state: 3339)
    let instants = (0..<count).map { _ in Double(Int.random(in: 0..<4_102_444_800, using: &random)) }
    let dates = instants.map(Date.init(timeIntervalSince1970:))
    let plain = instants.map { InternetTime.format(secondsSince1970: $0) }
    let fractional = plain.map { String($0.dropLast()) + ".250Z" }
    let style = Date.ISO8601FormatStyle(), fractionStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    let formatter = ISO8601DateFormatter(), fractionFormatter = makeFractionFormatter()
    typealias Work = () -> Int
    let workloads: [(String, [Work])] = [
        ("format `2020-11-05T10:00:00Z`", [
            { instants.reduce(0) { $0 &+ InternetTime.format(secondsSince1970: $1).utf8.count } },
            { dates.reduce(0) { $0 &+ style.format($1).utf8.count } },
            { dates.reduce(0) { $0 &+ formatter.string(from: $1).utf8.count } },
        ]),
        ("parse `2020-11-05T10:00:00Z`", [
            { plain.reduce(0) { $0 &+ Int(InternetTime.parse($1) ?? 0) } },
            { plain.reduce(0) { $0 &+ Int((try? style.parse($1))?.timeIntervalSince1970 ?? 0) } },
            { plain.reduce(0) { $0 &+ Int(formatter.date(from: $1)?.timeIntervalSince1970 ?? 0) } },
        ]),
        ("parse `2020-11-05T10:00:00.250Z`", [
            { fractional.reduce(0) { $0 &+ Int(InternetTime.parse($1) ?? 0) } },
            { fractional.reduce(0) { $0 &+ Int((try? fractionStyle.parse($1))?.timeIntervalSince1970 ?? 0) } },
            { fractional.reduce(0) { $0 &+ Int(fractionFormatter.date(from: $1)?.timeIntervalSince1970 ?? 0) } },
        ]),
    ]
    print("| \(count) timestamps | InternetTime | Date.ISO8601FormatStyle | ISO8601DateFormatter | FormatStyle / ours | Formatter / ours |")
    print("|---|---|---|---|---|---|")
    for (name, variants) in workloads {
        var rates = [[Double]](repeating: [], count: variants.count)
        var checks = [Set<Int>](repeating: [], count: variants.count)
        for round in 0..<runs {
            for step in 0..<variants.count {
                let which = (step + round) % variants.count // each goes first in turn
                var check = 0
                rates[which].append(Double(count) / seconds { check = variants[which]() })
                checks[which].insert(check)
            }
        }
        let rate = rates.map(median)
        let agree = Set(checks.map { $0.first ?? 0 }).count == 1 ? "" : " (results differ)"
        print("| \(name)\(agree) | " + rate.map { String(format: "%.0f k/s", $0 / 1000) }.joined(separator: " | ")
            + " | \(ratio(rate[1], rate[0])) | \(ratio(rate[2], rate[0])) |")
    }
    let styleFormatDiffers = zip(instants, dates).filter { InternetTime.format(secondsSince1970: $0) != style.format($1) }.count
    let formatterDiffers = zip(instants, dates).filter { InternetTime.format(secondsSince1970: $0) != formatter.string(from: $1) }.count
    print("\nFormatted differently from InternetTime in \(count) instants (1970-2099): FormatStyle \(styleFormatDiffers), ISO8601DateFormatter \(formatterDiffers).")
}

func accepts() {
    let good = [
        "2020-11-05T10:00:00Z", "2020-11-05T10:00:00z", "2020-11-05t10:00:00Z", "2020-11-05T10:00:00.250Z",
        "2020-11-05T10:00:00.123456789Z", "2020-11-05T10:00:00.5+05:30", "2020-11-05T10:00:00+05:30",
        "2020-11-05T10:00:00-08:00", "2020-11-05T10:00:00+00:00", "2020-11-05T10:00:00-00:00",
        "2020-11-05T10:00:00.000+0000", "2020-11-05T10:00:00-0130", "2020-02-29T00:00:00Z",
        "1900-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
    ]
    let bad = [
        "", "2020-11-05", "2020-11-05T10:00:00", "2020-13-05T10:00:00Z", "2021-02-29T10:00:00Z", "2020-11-31T10:00:00Z",
        "2020-11-05T24:00:00Z", "2020-11-05T10:60:00Z", "2020-11-05T10:00:00.Z", "2020-11-05T10:00:00+25:00",
        "2020-11-05T10:00:00Zjunk", "20201105T100000Z", "２０２０-11-05T10:00:00Z", "2020-11-05 10:00:00Z",
    ]
    let style = Date.ISO8601FormatStyle(), fractionStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    let formatter = ISO8601DateFormatter(), fractionFormatter = makeFractionFormatter()
    func show(_ value: Double?) -> String { value.map { "\($0)" } ?? "refused" }
    print("| input | InternetTime | FormatStyle | FormatStyle(includingFractionalSeconds) | ISO8601DateFormatter (plain, else fractional) |")
    print("|---|---|---|---|---|")
    var differences = 0
    for text in good + bad {
        let ours = InternetTime.parse(text)
        let plainStyle = (try? style.parse(text))?.timeIntervalSince1970
        let withFraction = (try? fractionStyle.parse(text))?.timeIntervalSince1970
        let foundation = (formatter.date(from: text) ?? fractionFormatter.date(from: text))?.timeIntervalSince1970
        // Essentials counts as agreeing when one of its two styles gives InternetTime's answer.
        let essentials = plainStyle == ours || withFraction == ours
        if !essentials { differences += 1 }
        print("| `\(text)`\(essentials ? "" : " **differs**") | \(show(ours)) | \(show(plainStyle)) | \(show(withFraction)) | \(show(foundation)) |")
    }
    print("\n\(differences) of \(good.count + bad.count) inputs where neither FormatStyle gives InternetTime's answer.")
}

let arguments = Array(CommandLine.arguments.dropFirst())
let runs = arguments.count > 1 ? Int(arguments[1]) ?? 3 : 3
switch arguments.first {
case "maps": maps(runs: runs)
case "map-rss": mapResident(arguments[1], count: Int(arguments[2]) ?? 100_000)
case "times": times(runs: runs)
case "accepts": accepts()
default: print("usage: StructuresBenchmark maps|times RUNS, map-rss compact|ordered COUNT, accepts")
}
