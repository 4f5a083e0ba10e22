import AmpelCore
import AmpelData
import AmpelDomain
import Foundation
import Testing

/// Trend and phase in force over the whole bundled history, checked against a second,
/// independent reading of the rules written here: its own CSV parsing, thresholds, calendar
/// (Foundation's), holidays typed from the law and a walk of its own shape.
@Suite struct TimeCourseTests {
    /// The bundled CSV, read here without the data layer: ags -> day number -> incidence.
    static let raw: (values: [String: [Int: Double]], days: [Int]) = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/AmpelData/Resources/rki/rki_fixed_7day_incidence_bavaria_2020-11-18_2021-11-22.csv")
        let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        var values: [String: [Int: Double]] = [:]
        var days: Set<Int> = []
        // By newline, not "\n": a "\r\n" is one Character.
        for line in text.split(whereSeparator: \.isNewline).dropFirst() {
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard f.count == 5, let n = dayNumber(f[0]), let v = Double(f[4].trimmingCharacters(in: .whitespacesAndNewlines)) else { continue }
            values[f[1], default: [:]][n] = v
            days.insert(n)
        }
        return (values, days.sorted())
    }()

    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    static func dayNumber(_ iso: String) -> Int? {
        let p = iso.split(separator: "-").compactMap { Int($0) }
        guard p.count == 3, let date = utc.date(from: DateComponents(year: p[0], month: p[1], day: p[2])) else { return nil }
        return Int(date.timeIntervalSince1970 / 86_400)
    }

    static func iso(_ number: Int) -> String {
        let c = utc.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: Double(number) * 86_400))
        return String(format: "%04d-%02d-%02d", c.year!, c.month!, c.day!)
    }

    /// The law's rules read once more: thresholds as ranks, counts, delay, working days.
    struct Law: Sendable {
        var rank: @Sendable (Double) -> Int
        var enter = 1
        var leave = 1
        var delay = 0
        var workingDaysOnly = false
        var holidays: Set<String> = []

        func isCounted(_ day: Int) -> Bool {
            guard workingDaysOnly else { return true }
            let weekday = utc.component(.weekday, from: Date(timeIntervalSince1970: Double(day) * 86_400))  // 1 = Sunday
            return weekday != 1 && !holidays.contains(iso(day))
        }

        /// Phase in force, measured phase and since on each of `days` (consecutive, oldest first).
        func inForce(_ days: [(day: Int, value: Double)]) -> [(phase: Int, measured: Int, since: Int)] {
            enum State {
                case settled
                case waiting(phase: Int, from: Int)
            }
            var phase = rank(days[0].value)
            var since = days[0].day
            var state = State.settled
            var upCount = 0, upLowest = Int.max
            var downCount = 0, downHighest = Int.min
            var answers: [(phase: Int, measured: Int, since: Int)] = []
            for (day, value) in days {
                let m = rank(value)
                defer { answers.append((phase, m, since)) }
                switch state {
                case .waiting(let next, let from) where from <= day:
                    phase = next
                    since = from
                    state = .settled
                    upCount = 0; downCount = 0; upLowest = .max; downHighest = .min
                    continue
                case .waiting:
                    continue
                case .settled:
                    break
                }
                var decided: Int?
                if m > phase {
                    upCount += 1
                    upLowest = min(upLowest, m)
                    downCount = 0; downHighest = .min
                    if upCount == enter { decided = upLowest }
                } else if m < phase {
                    upCount = 0; upLowest = .max
                    if isCounted(day) {
                        downCount += 1
                        downHighest = max(downHighest, m)
                    }
                    if downCount == leave { decided = downHighest }
                } else {
                    upCount = 0; upLowest = .max; downCount = 0; downHighest = .min
                }
                if let decided {
                    upCount = 0; upLowest = .max; downCount = 0; downHighest = .min
                    if delay == 0 {
                        phase = decided
                        since = day
                    } else {
                        state = .waiting(phase: decided, from: day + delay)
                    }
                }
            }
            return answers
        }
    }

    static let phaseNames = ["green", "yellow", "red", "darkred"]

    static let notbremse = Law(
        rank: { $0 > 100 ? 3 : 2 }, enter: 3, leave: 5, delay: 2, workingDaysOnly: true,
        holidays: ["2021-01-01", "2021-01-06", "2021-04-02", "2021-04-05", "2021-05-01", "2021-05-13", "2021-05-24",
                   "2021-06-03", "2021-10-03", "2021-11-01", "2021-12-25", "2021-12-26"])
    static let bavaria = Law(rank: { $0 < 35 ? 0 : $0 <= 50 ? 1 : $0 <= 100 ? 2 : 3 })

    /// Every day of the bundled history, every district: phase in force, measured phase,
    /// since and trend as the signal gives them equal the independent reading.
    @Test(arguments: [("notbremse-2021", notbremse), ("bavaria", bavaria)])
    func coursesOverTheBundledHistoryMatchAnIndependentReading(name: String, law: Law) throws {
        let ruleSet = try RuleSetCatalog.bundled(name)
        let (values, days) = Self.raw
        #expect(days.count == 370)
        #expect(values.count == 96)
        // The law walked once per district over the whole history, from its first day.
        let walked = values.mapValues { series in law.inForce(days.map { ($0, series[$0]!) }) }
        var differing = 0
        var withTrend = 0
        var zeroWeekBefore = 0
        var compared = 0
        for (index, day) in days.enumerated() {
            let dataset = try BundledData.shared.history(on: Day(iso: Self.iso(day)), ruleSet: ruleSet)
            for (ags, series) in values {
                let entry = try #require(dataset[ags])
                let signal = try ruleSet.signal(for: entry, dataDate: dataset.date, language: .en, course: dataset.courses[ags])
                let expected = walked[ags]![index]
                #expect(signal.phase == Self.phaseNames[expected.phase], "\(ags) \(Self.iso(day))")
                #expect(signal.measuredPhase == Self.phaseNames[expected.measured], "\(ags) \(Self.iso(day))")
                #expect(signal.since == Self.iso(expected.since), "\(ags) \(Self.iso(day))")
                if expected.phase != expected.measured { differing += 1 }
                // The trend: the 14 calendar days up to today, the change against 7 days before.
                let fortnight = (day - 13...day).compactMap { series[$0] }
                if fortnight.count == 14, fortnight[6] > 0 {
                    let change = ((fortnight[13] - fortnight[6]) / fortnight[6] * 1000).rounded() / 10
                    let direction = change > 5 ? "rising" : change < -5 ? "falling" : "steady"
                    let trend = try #require(signal.trend, "\(ags) \(Self.iso(day))")
                    #expect(trend.series == fortnight)
                    #expect(trend.change7 == change, "\(ags) \(Self.iso(day))")
                    #expect(trend.direction.rawValue == direction)
                    withTrend += 1
                } else {
                    if fortnight.count == 14 { zeroWeekBefore += 1 }
                    #expect(signal.trend == nil, "\(ags) \(Self.iso(day))")
                }
                compared += 1
            }
        }
        #expect(compared == 370 * 96)
        #expect(withTrend + zeroWeekBefore == 357 * 96, "the first 13 days have no trend")
        #expect(zeroWeekBefore > 0, "summer 2021 has districts at 0: no percent change, no trend")
        if ruleSet.dayCounts.isImmediate {
            #expect(differing == 0)
        } else {
            // The days on which the law and the day's value disagree are where it matters.
            #expect(differing > 1000, "\(differing)")
        }
    }
}
