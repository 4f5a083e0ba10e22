import AmpelDomain
import Foundation

/// The RKI's "fixed" daily 7-day incidence per Bavarian district, one dataset per day.
///
/// Read from the CSV `date,ags,county,cases_7d,incidence_7d` with district facts from
/// `bavaria_population.csv` and the state's own incidence from the states file.
public struct DailyHistory: Sendable {
    public let days: [Day]
    private let values: [Day: [String: Double]]
    private let stateValues: [Day: Double]
    private let districts: [String: District]

    /// The dataset of a day in ``days``.
    public func dataset(on day: Day) -> Dataset {
        var entries: [String: DistrictIncidence] = [:]
        for (ags, incidence) in values[day] ?? [:] {
            guard let district = districts[ags] else { continue }
            entries[ags] = DistrictIncidence(district: district, incidence: incidence, stateIncidence: stateValues[day])
        }
        return Dataset(date: day, source: "history", districts: entries)
    }

    /// One district's incidence on every day it has one, oldest first (`/api/districts/{ags}/history`).
    public func series(ags: String) -> [(day: Day, incidence: Double)] {
        days.compactMap { day in values[day]?[ags].map { (day, $0) } }
    }

    /// Parses the three CSV files; any malformed line is an error naming the file and line.
    public static func parse(daily: Data, states: Data, population: Data, state: String = "Bayern") throws(DataError) -> DailyHistory {
        var districts: [String: District] = [:]
        try eachRow(population, file: "bavaria_population.csv", columns: 8) { (line, f) throws(DataError) in
            guard District.isValidCode(f[0]) else { throw DataError(.invalidValue, "bavaria_population.csv line \(line): bad ags '\(f[0])'") }
            let county = f[3]
            districts[f[0]] = District(
                ags: f[0], name: county, shortName: f[1],
                kind: county.hasPrefix("SK ") ? .city : .county,
                state: state, population: Int(f[4]))
        }
        var values: [Day: [String: Double]] = [:]
        try eachRow(daily, file: "daily history", columns: 5) { (line, f) throws(DataError) in
            guard let day = Day(iso: f[0]) else { throw DataError(.invalidValue, "daily history line \(line): bad date '\(f[0])'") }
            guard District.isValidCode(f[1]) else { throw DataError(.invalidValue, "daily history line \(line): bad ags '\(f[1])'") }
            guard let incidence = Double(f[4]), incidence.isFinite, incidence >= 0 else {
                throw DataError(.invalidValue, "daily history line \(line): bad incidence '\(f[4])'")
            }
            values[day, default: [:]][f[1]] = incidence
        }
        var stateValues: [Day: Double] = [:]
        try eachRow(states, file: "state history", columns: 3) { (line, f) throws(DataError) in
            guard f[1] == state, let day = Day(iso: f[0]), let value = Double(f[2]), value.isFinite, value >= 0 else { return }
            stateValues[day] = value
        }
        guard !values.isEmpty else { throw DataError(.empty, "the daily history is empty") }
        return DailyHistory(days: values.keys.sorted(), values: values, stateValues: stateValues, districts: districts)
    }

    /// Calls `body` with the 1-based line number and fields of every data row (after the header).
    ///
    /// The files are plain CSV without quoted commas; a UTF-8 BOM is skipped.
    static func eachRow(_ data: Data, file: String, columns: Int, _ body: (Int, [String]) throws(DataError) -> Void) throws(DataError) {
        guard String(data: data, encoding: .utf8) != nil else {
            throw DataError(.malformed, "\(file) is not UTF-8")
        }
        var bytes = ArraySlice([UInt8](data))
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        var lineNumber = 0
        // Split on bytes: "\r\n" is one Character in Swift, so a Character split would miss it.
        for rawLine in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = rawLine.last == UInt8(ascii: "\r") ? rawLine.dropLast() : rawLine
            if lineNumber == 1 || line.isEmpty { continue }
            let fields = line.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            guard fields.count == columns else {
                throw DataError(.malformed, "\(file) line \(lineNumber): \(fields.count) fields, expected \(columns)")
            }
            try body(lineNumber, fields)
        }
    }
}
