import AmpelDomain
import Foundation

/// Reads the RKI's hospitalisation file `Aktuell_Deutschland_adjustierte-COVID-19-Hospitalisierungen.csv`:
/// per day, state (`00` Germany, `01`...`16`) and age group, the COVID-19 hospital admissions of
/// the last 7 days and their incidence per 100,000.
///
/// Only the fixed figures (`fixierte_7T_...`) are read: they are what the RKI reported on the
/// day and do not move with late reports, as a signal's past must not. Only the all-ages rows
/// (`00+`) make the series; rows of other age groups are checked like the others, then skipped
/// and counted. The file must be whole: every day from its first to its last has a `00+` row
/// for each of the 17 regions, so a gap is an error, never a missing value. Rows may come in any
/// order (the RKI writes the newest day first).
///
/// ```swift
/// let table = try HospitalisationCSV.parse(data, file: "Aktuell_Deutschland_adjustierte-COVID-19-Hospitalisierungen.csv")
/// let cases = table[IndicatorKey(.hospitalisationCases7d, .state)]
/// ```
public enum HospitalisationCSV {
    /// The columns the file must have, by name; their order is taken from the header.
    public static let columns = ["Datum", "Bundesland_Id", "Altersgruppe", "fixierte_7T_Hospitalisierung_Faelle",
                                 "fixierte_7T_Hospitalisierung_Inzidenz"]

    /// The age group read: all ages.
    public static let allAges = "00+"

    /// The file's two series (``IndicatorName/hospitalisationCases7d`` and
    /// ``IndicatorName/hospitalisationIncidence7d``, in that order), its data rows and the rows
    /// of other age groups skipped.
    public typealias Table = IndicatorTable

    /// A `00+` row's values, and its line for the message of a duplicate.
    private struct Row {
        let cases: Double?
        let incidence: Double?
        let line: Int
    }

    /// Reads the whole file.
    ///
    /// - Parameters:
    ///   - data: the file's bytes.
    ///   - file: the file's name in messages.
    /// - Returns: the series of both indicators at level ``IndicatorLevel/state``, regions `00`...`16`,
    ///   from the file's first to its last day; `nil` where the file says `NA`.
    /// - Throws: ``DataError``, its message naming the file and the line: `empty` (no header, no
    ///   data rows, or no `00+` row), `missing-field` (a column missing from the header),
    ///   `malformed` (a row without the header's number of fields), `invalid-value` (a bad day, a
    ///   state id outside `00`...`16`, a value neither a non-negative number nor `NA`),
    ///   `duplicate-district` (a second `00+` row of a day and state), `missing-districts` (a day
    ///   without a `00+` row of a region).
    public static func parse(_ data: Data, file: String) throws(DataError) -> Table {
        var reader = try IndicatorCSVReader(data, file: file, columns: columns)
        // Indices into `columns`.
        let dateColumn = 0, stateColumn = 1, ageColumn = 2, casesColumn = 3, incidenceColumn = 4
        var kept: [Int: Row] = [:]
        var rows = 0
        var skipped = 0
        var first = Int.max
        var last = Int.min
        while try reader.next() {
            rows += 1
            let day = try reader.day(dateColumn)
            let state = try reader.state(stateColumn, in: 0...16)
            let cases = try reader.number(casesColumn)
            let incidence = try reader.number(incidenceColumn)
            guard reader.field(ageColumn, is: allAges) else {
                skipped += 1
                continue
            }
            let row = Row(cases: cases, incidence: incidence, line: reader.lineNumber)
            if let earlier = kept.updateValue(row, forKey: IndicatorCSVReader.key(day: day, state: state)) {
                throw reader.lineError(.duplicateDistrict, "a second row for state \(IndicatorCSVReader.stateID(state)), age group \(allAges) on \(Day(daysSinceEpoch: day)) (the first is line \(earlier.line))")
            }
            first = min(first, day)
            last = max(last, day)
        }
        guard rows > 0 else { throw reader.fileError(.empty, "the file has a header but no data rows") }
        guard first <= last else {
            throw reader.fileError(.empty, "the file has no row for age group \(allAges) (\(skipped) rows of other age groups)")
        }
        let byState = try reader.byState(kept, days: first...last, states: 0...16, detail: ", age group \(allAges)")
        var cases: [String: [Double?]] = [:]
        var incidences: [String: [Double?]] = [:]
        for (state, entries) in byState.enumerated() {
            let id = IndicatorCSVReader.stateID(state)
            cases[id] = entries.map(\.cases)
            incidences[id] = entries.map(\.incidence)
        }
        let firstDay = Day(daysSinceEpoch: first)
        let lastDay = Day(daysSinceEpoch: last)
        return Table(
            series: [
                IndicatorSeries(key: IndicatorKey(.hospitalisationCases7d, .state), firstDay: firstDay, lastDay: lastDay, values: cases),
                IndicatorSeries(key: IndicatorKey(.hospitalisationIncidence7d, .state), firstDay: firstDay, lastDay: lastDay, values: incidences),
            ],
            rows: rows, skippedRows: skipped)
    }
}
