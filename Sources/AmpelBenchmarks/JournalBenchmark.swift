import AmpelDaemon

/// The journal's record checksum: CRC-32C by the table (what the daemon did before) against the
/// CPU's instruction, over buffers of record sizes (an input fix is about 120 bytes of
/// checksummed fields, a device record 120-250, an alert about 1,000), in one process, the
/// two alternating which goes first in each round; medians of the rounds.
enum JournalBenchmark {
    static func main(_ arguments: [String]) {
        var rounds = 9
        var bytesPerRound = 64 << 20
        var index = 0
        while index + 1 < arguments.count {
            switch arguments[index] {
            case "--rounds": rounds = Int(arguments[index + 1]) ?? rounds
            case "--bytes": bytesPerRound = Int(arguments[index + 1]) ?? bytesPerRound
            default: break
            }
            index += 2
        }
        guard CRC32C.hardware else {
            print("this CPU has no CRC-32C instruction: the daemon uses the table")
            return
        }
        var generator = SystemRandomNumberGenerator()
        print("| record bytes | table ns/record | instruction ns/record | table / instruction |")
        print("|---|---|---|---|")
        for size in [120, 250, 1_000] {
            let data = (0..<size).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            let records = max(1, bytesPerRound / size)
            var table: [Double] = []
            var instruction: [Double] = []
            var sink: UInt32 = 0
            data.withUnsafeBytes { bytes in
                func time(hardware: Bool) -> Double {
                    let clock = ContinuousClock()
                    let start = clock.now
                    for _ in 0..<records { sink ^= CRC32C.checksum(bytes, hardware: hardware) }
                    let elapsed = (clock.now - start).components
                    return (Double(elapsed.seconds) * 1e9 + Double(elapsed.attoseconds) / 1e9) / Double(records)
                }
                for round in 0..<rounds {
                    if round % 2 == 0 {
                        table.append(time(hardware: false))
                        instruction.append(time(hardware: true))
                    } else {
                        instruction.append(time(hardware: true))
                        table.append(time(hardware: false))
                    }
                }
            }
            let (t, h) = (median(table), median(instruction))
            print("| \(size) | \(format(t)) | \(format(h)) | \(format(t / h))x |")
            // Read, so the optimizer keeps every checksum it adds up.
            if sink == 0x5EED_5EED { print("(checksums: \(sink))") }
        }
    }

    static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

    static func format(_ value: Double) -> String {
        let scaled = (value * 10).rounded() / 10
        return "\(scaled)"
    }
}
