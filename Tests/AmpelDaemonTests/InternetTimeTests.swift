@testable import AmpelDaemon
import AmpelGeo
import Foundation
import Testing

/// `InternetTime` replaces Foundation's ISO 8601 formatters; Foundation is the oracle here.
@Suite("RFC 3339 time without Foundation formatters")
struct InternetTimeTests {
    @Test("formatting agrees with ISO8601DateFormatter from 1900 to 2200")
    func formatAgreesWithFoundation() {
        let formatter = ISO8601DateFormatter()
        var random = SplitMix64(seed: 1970)
        var samples: [Double] = [0, -1, 86_399, 86_400, 951_782_400, 1_604_570_400, 4_107_542_400, -2_208_988_800]
        for _ in 0..<5000 { samples.append(Double(Int.random(in: -2_208_988_800..<7_258_118_400, using: &random)) + 0.75) }
        for seconds in samples {
            #expect(InternetTime.format(secondsSince1970: seconds) == formatter.string(from: Date(timeIntervalSince1970: seconds)), "\(seconds)")
        }
    }

    @Test("parsing agrees with ISO8601DateFormatter, incl. fractions and Jackson's +HHMM")
    func parseAgreesWithFoundation() {
        let plain = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var random = SplitMix64(seed: 3339)
        for _ in 0..<3000 {
            let seconds = Int.random(in: 0..<4_102_444_800, using: &random)
            let text = plain.string(from: Date(timeIntervalSince1970: Double(seconds)))
            #expect(InternetTime.parse(text) == Double(seconds), "\(text)")
            // The same instant in +05:30 and Jackson's -0800 form.
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(secondsFromGMT: 19_800)!
            let local = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: Double(seconds)))
            let shifted = String(format: "%04d-%02d-%02dT%02d:%02d:%02d.250+05:30", local.year!, local.month!, local.day!, local.hour!, local.minute!, local.second!)
            #expect(InternetTime.parse(shifted) == fractional.date(from: shifted)?.timeIntervalSince1970, "\(shifted)")
        }
        #expect(InternetTime.parse("2020-11-05T10:00:00.000+0000") == Double(1_604_570_400))
        #expect(InternetTime.parse("2020-11-05T10:00:00-0130") == Double(1_604_570_400 + 5400))
        #expect(InternetTime.parse("2020-02-29T00:00:00Z") == fractional.date(from: "2020-02-29T00:00:00.0Z")?.timeIntervalSince1970)
    }

    @Test("malformed and impossible dates are refused")
    func refusesBadInput() {
        for bad in ["", "2020-11-05", "2020-11-05T10:00:00", "2020-13-05T10:00:00Z", "2021-02-29T10:00:00Z", "2020-11-31T10:00:00Z",
                    "2020-11-05T24:00:00Z", "2020-11-05T10:60:00Z", "2020-11-05T10:00:00.Z", "2020-11-05T10:00:00+25:00",
                    "2020-11-05T10:00:00Zjunk", "20201105T100000Z", "２０２０-11-05T10:00:00Z", "2020-11-05 10:00:00Z"] {
            #expect(InternetTime.parse(bad) == nil, "\(bad)")
        }
    }
}
