import AmpelDomain
import Foundation

/// Reads the DIVI intensive-care register's state file `Intensivregister_Bundeslaender_Kapazitaeten.csv`
/// (published by the RKI): per day, state (`01`...`16`) and treatment group (`behandlungsgruppe`,
/// e.g. `Erwachsene`), the COVID-19 patients in intensive care (`faelle_covid_aktuell`).
///
/// A state's value of a day is the sum over its rows of that day, one per treatment group;
/// `NA` in any of them leaves the state without a value that day, as a part is not the whole.
/// Germany (`00`) is the sum of the 16 states on the days all 16 have a value: the file has no
/// row of its own for it. The file must be whole: every day from its first to its last has rows
/// for all 16 states. Rows may come in any order (the register writes the oldest day first).
public enum IntensiveCareCSV {
    /// The columns the file must have, by name; their order is taken from the header.
    public static let columns = ["datum", "bundesland_id", "behandlungsgruppe", "faelle_covid_aktuell"]

    /// The file's one series (``IndicatorName/icuCovidPatients``) and its data rows; none is
    /// skipped (every treatment group counts).
    public typealias Table = IndicatorTable

    /// A state's patients of a day so far; `complete` until a row says `NA`.
    private struct Sum {
        var patients = 0
        var complete = true

        mutating func add(_ value: Int?) {
            if let value { patients += value } else { complete = false }
        }
    }

    /// A row's identity: a second row of it is refused.
    private struct RowKey: Hashable {
        let day: Int
        let state: Int
        let group: Int
    }

    /// Reads the whole file.
    ///
    /// - Parameters:
    ///   - data: the file's bytes.
    ///   - file: the file's name in messages.
    /// - Returns: the series of ``IndicatorName/icuCovidPatients`` at level ``IndicatorLevel/state``,
    ///   regions `00` (the states' sum) and `01`...`16`, from the file's first to its last day.
    /// - Throws: ``DataError``, its message naming the file and the line: `empty` (no header or no
    ///   data rows), `missing-field` (a column missing from the header), `malformed` (a row
    ///   without the header's number of fields), `invalid-value` (a bad day, a state id outside
    ///   `01`...`16`, a value neither a non-negative integer nor `NA`), `duplicate-district` (a
    ///   second row of a day, state and treatment group), `missing-districts` (a day without a row
    ///   of a state).
    public static func parse(_ data: Data, file: String) throws(DataError) -> Table {
        var reader = try IndicatorCSVReader(data, file: file, columns: columns)
        // Indices into `columns`.
        let dateColumn = 0, stateColumn = 1, groupColumn = 2, patientsColumn = 3
        var groups: [String: Int] = [:]
        var lines: [RowKey: Int] = [:]
        var sums: [Int: Sum] = [:]
        var rows = 0
        var first = Int.max
        var last = Int.min
        while try reader.next() {
            rows += 1
            let day = try reader.day(dateColumn)
            let state = try reader.state(stateColumn, in: 1...16)
            let patients = try reader.integer(patientsColumn)
            // The groups as small numbers: the duplicate check hashes three integers a row.
            let name = reader.text(groupColumn)
            let group: Int
            if let known = groups[name] {
                group = known
            } else {
                group = groups.count
                groups[name] = group
            }
            if let earlier = lines.updateValue(reader.lineNumber, forKey: RowKey(day: day, state: state, group: group)) {
                throw reader.lineError(.duplicateDistrict, "a second row for state \(IndicatorCSVReader.stateID(state)), behandlungsgruppe '\(name)' on \(Day(daysSinceEpoch: day)) (the first is line \(earlier))")
            }
            sums[IndicatorCSVReader.key(day: day, state: state), default: Sum()].add(patients)
            first = min(first, day)
            last = max(last, day)
        }
        guard rows > 0 else { throw reader.fileError(.empty, "the file has a header but no data rows") }
        let byState = try reader.byState(sums, days: first...last, states: 1...16, detail: "")
        var values: [String: [Double?]] = [:]
        for (index, entries) in byState.enumerated() {
            values[IndicatorCSVReader.stateID(index + 1)] = entries.map { sum -> Double? in sum.complete ? Double(sum.patients) : nil }
        }
        var germany = [Double?](repeating: nil, count: last - first + 1)
        for day in germany.indices {
            var total = 0
            var complete = true
            for entries in byState {
                let sum = entries[day]
                guard sum.complete else {
                    complete = false
                    break
                }
                total += sum.patients
            }
            if complete { germany[day] = Double(total) }
        }
        values["00"] = germany
        let series = IndicatorSeries(key: IndicatorKey(.icuCovidPatients, .state), firstDay: Day(daysSinceEpoch: first),
                                     lastDay: Day(daysSinceEpoch: last), values: values)
        return Table(series: [series], rows: rows, skippedRows: 0)
    }
}
