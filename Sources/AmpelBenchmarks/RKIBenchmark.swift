import AmpelData
import AmpelDomain
import AmpelSyntheticData
import Foundation

/// The RKI district file (Benchmarks/rki/run.sh): `generate` writes a full-size file in the
/// dataset's schema (every district, 2020-01-03 to the national file's last day: about a
/// million rows); `parse` reads a file into memory once and times ``RKIDistrictCSV`` over it
/// against the floor of any reader, finding every line end with `memchr`, in the same
/// process and rounds, alternating which goes first; medians of the rounds.
enum RKIBenchmark {
    static func main(_ arguments: [String]) {
        switch arguments.first {
        case "generate":
            generate(Array(arguments.dropFirst()))
        case "parse":
            parse(Array(arguments.dropFirst()))
        default:
            print("usage: AmpelBenchmarks rki generate --out FILE [--from DAY] [--to DAY] | parse FILE [--rounds N] [--window DAYS]")
        }
    }

    static func option(_ name: String, in arguments: [String]) -> String? {
        arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
    }

    static func generate(_ arguments: [String]) {
        guard let out = option("--out", in: arguments) else { return print("generate needs --out FILE") }
        do {
            let last = try RKIDistrictFile.nationalDays().last
            let file = try RKIDistrictFile(from: option("--from", in: arguments) ?? "2020-01-03", to: option("--to", in: arguments) ?? last)
            try file.write(to: URL(fileURLWithPath: out))
            print("\(file.rowCount) rows, \(file.days.first ?? "") to \(file.days.last ?? "") -> \(out)")
        } catch {
            print("cannot generate: \(error)")
            exit(1)
        }
    }

    static func parse(_ arguments: [String]) {
        guard let path = arguments.first, let data = FileManager.default.contents(atPath: path) else {
            return print("parse needs a readable FILE")
        }
        let rounds = Int(option("--rounds", in: arguments) ?? "") ?? 9
        let window = Int(option("--window", in: arguments) ?? "") ?? 28
        let chunk = 1 << 16
        var parser: [Double] = []
        var floor: [Double] = []
        var sink = 0
        func seconds(_ body: () -> Void) -> Double {
            let clock = ContinuousClock()
            let start = clock.now
            body()
            let elapsed = (clock.now - start).components
            return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        }
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            func runParser() -> Double {
                seconds {
                    let reader = RKIDistrictCSV(windowDays: window)
                    var start = 0
                    do {
                        while start < bytes.count {
                            let end = min(start + chunk, bytes.count)
                            try reader.consume(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
                            start = end
                        }
                        sink &+= try reader.finish(region: .germany).rows
                    } catch {
                        print("the file is rejected: \(error)")
                        exit(1)
                    }
                }
            }
            func runFloor() -> Double {
                seconds {
                    var lines = 0
                    var position = 0
                    let base = bytes.baseAddress!
                    while position < bytes.count, let hit = memchr(base + position, 0x0A, bytes.count - position) {
                        lines += 1
                        position = UnsafeRawPointer(hit) - base + 1
                    }
                    sink &+= lines
                }
            }
            for round in 0..<rounds {
                if round % 2 == 0 {
                    parser.append(runParser())
                    floor.append(runFloor())
                } else {
                    floor.append(runFloor())
                    parser.append(runParser())
                }
            }
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        let megabytes = Double(data.count) / 1e6
        let parse = median(parser), scan = median(floor)
        print("file: \(path), \(String(format: "%.1f", megabytes)) MB, window \(window) days, \(rounds) rounds (checksum \(sink % 1000))")
        print("| reader | median s | MB/s | / line scan |")
        print("|---|---|---|---|")
        print("| RKIDistrictCSV (every row checked, \(window) days kept) | \(String(format: "%.4f", parse)) | \(String(format: "%.0f", megabytes / parse)) | \(String(format: "%.1f", parse / scan)) |")
        print("| memchr line scan (floor) | \(String(format: "%.4f", scan)) | \(String(format: "%.0f", megabytes / scan)) | 1.0 |")
    }
}
