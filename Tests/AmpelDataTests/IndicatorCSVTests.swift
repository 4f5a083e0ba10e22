import AmpelData
import AmpelDomain
import Foundation
import Testing

/// The state-level indicator files: the RKI's real files read against their raw text, every way
/// a file is refused, and the series' look-ups and keeping of published values.
@Suite struct IndicatorCSVTests {
    static let casesKey = IndicatorKey(.hospitalisationCases7d, .state)
    static let incidenceKey = IndicatorKey(.hospitalisationIncidence7d, .state)
    static let icuKey = IndicatorKey(.icuCovidPatients, .state)

    static let hospitalisationPath = "hospitalisierungen/Aktuell_Deutschland_adjustierte-COVID-19-Hospitalisierungen.csv"
    static let intensiveCarePath = "intensivregister/Intensivregister_Bundeslaender_Kapazitaeten.csv"

    static let regions = (0...16).map { IndicatorCSVTests.id($0) }

    static func id(_ state: Int) -> String { state < 10 ? "0\(state)" : "\(state)" }

    static func day(_ iso: String) -> Day { Day(iso: iso)! }

    /// A real RKI file, from `../shared/data/rki-github` beside the repository.
    static func realFile(_ path: String) throws -> (data: Data, text: String) {
        // Tests/AmpelDataTests/IndicatorCSVTests.swift: three levels up is the repository.
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let url = repository.deletingLastPathComponent().appendingPathComponent("shared/data/rki-github").appendingPathComponent(path)
        try #require(FileManager.default.fileExists(atPath: url.path),
                     "the RKI file '\(url.path)' is missing: these tests read the real files from ../shared/data/rki-github beside the repository")
        let data = try Data(contentsOf: url)
        return (data, String(decoding: data, as: UTF8.self))
    }

    /// Checks a refusal's reason and that its message names each of `parts` (a line, a day, a state).
    static func check(_ error: DataError?, _ reason: DataError.Reason, _ parts: String...,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        guard let error else { return }  // `#expect(throws:)` has recorded that nothing was thrown
        #expect(error.reason == reason, "\(error.message)", sourceLocation: sourceLocation)
        for part in parts {
            #expect(error.message.contains(part), "'\(error.message)' does not name '\(part)'", sourceLocation: sourceLocation)
        }
    }

    static func file(_ header: String, _ rows: [String], separator: String = "\n") -> Data {
        Data((([header] + rows).joined(separator: separator) + separator).utf8)
    }

    // MARK: - The real files

    @Test("the RKI's hospitalisation file: every 00+ row's fixed cases and incidence, as its raw text says")
    func realHospitalisationFile() throws {
        let (data, text) = try Self.realFile(Self.hospitalisationPath)
        let table = try HospitalisationCSV.parse(data, file: "hospitalisation.csv")
        let cases = try #require(table[Self.casesKey])
        let incidence = try #require(table[Self.incidenceKey])
        #expect(table.series.map(\.key) == [Self.casesKey, Self.incidenceKey])
        #expect(cases.firstDay == Self.day("2023-01-02"))
        #expect(cases.lastDay == Self.day("2026-08-21"))
        #expect(incidence.firstDay == cases.firstDay)
        #expect(incidence.lastDay == cases.lastDay)
        #expect(cases.regions == Self.regions)
        #expect(incidence.regions == Self.regions)
        #expect(cases.value(region: "00", on: Self.day("2026-08-21")) == 25)
        #expect(incidence.value(region: "00", on: Self.day("2026-08-21")) == 0.03)

        // Independently: the header's names, then every line split by hand.
        let lines = text.split(whereSeparator: \.isNewline)
        let header = lines[0].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let date = try #require(header.firstIndex(of: "Datum"))
        let state = try #require(header.firstIndex(of: "Bundesland_Id"))
        let age = try #require(header.firstIndex(of: "Altersgruppe"))
        let casesColumn = try #require(header.firstIndex(of: "fixierte_7T_Hospitalisierung_Faelle"))
        let incidenceColumn = try #require(header.firstIndex(of: "fixierte_7T_Hospitalisierung_Inzidenz"))
        var allAges = 0
        var mismatches: [String] = []
        for line in lines.dropFirst() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields[age] == "00+" else { continue }
            allAges += 1
            guard let day = Day(iso: String(fields[date])) else {
                mismatches.append(String(line))
                continue
            }
            let region = String(fields[state])
            if cases.value(region: region, on: day) != Double(fields[casesColumn])
                || incidence.value(region: region, on: day) != Double(fields[incidenceColumn]) {
                mismatches.append(String(line))
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) rows read differently, e.g. \(mismatches.prefix(3))")
        #expect(table.rows == lines.count - 1)
        #expect(table.rows - table.skippedRows == allAges)
        #expect(allAges == 17 * cases.dayCount)
    }

    @Test("the register's state file: a state's patients summed over its rows of a day, Germany the states' sum")
    func realIntensiveCareFile() throws {
        let (data, text) = try Self.realFile(Self.intensiveCarePath)
        let table = try IntensiveCareCSV.parse(data, file: "icu.csv")
        #expect(table.series.count == 1)
        let icu = try #require(table[Self.icuKey])
        #expect(icu.firstDay == Self.day("2020-03-20"))
        #expect(icu.lastDay == Self.day("2026-08-22"))
        #expect(icu.regions == Self.regions)
        #expect(icu.value(region: "09", on: Self.day("2021-11-10")) == 653)

        // Independently: the sums per day and state, and Germany on 2021-11-10, from the raw lines.
        let lines = text.split(whereSeparator: \.isNewline)
        let header = lines[0].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let date = try #require(header.firstIndex(of: "datum"))
        let state = try #require(header.firstIndex(of: "bundesland_id"))
        let patients = try #require(header.firstIndex(of: "faelle_covid_aktuell"))
        var sums: [String: Double] = [:]
        var withoutValue: Set<String> = []
        var germany = 0.0
        var statesOfTheDay: Set<String> = []
        for line in lines.dropFirst() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            let key = "\(fields[date]) \(fields[state])"
            if let value = Double(fields[patients]) { sums[key, default: 0] += value } else { withoutValue.insert(key) }
            if fields[date] == "2021-11-10" {
                germany += Double(fields[patients]) ?? .nan
                statesOfTheDay.insert(String(fields[state]))
            }
        }
        var mismatches: [String] = []
        for key in Set(sums.keys).union(withoutValue) {
            let parts = key.split(separator: " ").map(String.init)
            let expected = withoutValue.contains(key) ? nil : sums[key]
            if icu.value(region: parts[1], on: Self.day(parts[0])) != expected { mismatches.append(key) }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) state days read differently, e.g. \(mismatches.sorted().prefix(3))")
        #expect(sums.count + withoutValue.subtracting(sums.keys).count == 16 * icu.dayCount)
        #expect(statesOfTheDay.count == 16)
        #expect(icu.value(region: "00", on: Self.day("2021-11-10")) == germany)
        #expect(table.rows == lines.count - 1)
        #expect(table.skippedRows == 0)
    }

    // MARK: - Hospitalisations: a small file

    static let hospitalisationHeader = "Datum,Bundesland,Bundesland_Id,Altersgruppe,fixierte_7T_Hospitalisierung_Faelle,aktualisierte_7T_Hospitalisierung_Faelle,Bevoelkerung,fixierte_7T_Hospitalisierung_Inzidenz"
    /// Newest first, as the RKI writes them.
    static let hospitalisationDays = ["2024-05-04", "2024-05-03", "2024-05-02"]

    /// Cases `100 + 10 x state + day index`, incidence `state + 0.25`.
    static func hospitalisationRow(_ dayIndex: Int, _ state: Int, age: String = "00+", cases: String? = nil) -> String {
        let value = cases ?? String(100 + 10 * state + dayIndex)
        return "\(hospitalisationDays[dayIndex]),Land \(id(state)),\(id(state)),\(age),\(value),NA,1000000,\(Double(state) + 0.25)"
    }

    /// The 17 regions on each day: the row of day index `d` and state `s` is `rows[17 d + s]`, on line `17 d + s + 2`.
    static func hospitalisationRows() -> [String] {
        hospitalisationDays.indices.flatMap { d in (0...16).map { hospitalisationRow(d, $0) } }
    }

    static func hospitalisationError(header: String = IndicatorCSVTests.hospitalisationHeader,
                                     _ edit: (inout [String]) -> Void) -> DataError? {
        var rows = hospitalisationRows()
        edit(&rows)
        let data = file(header, rows)
        return #expect(throws: DataError.self) { try HospitalisationCSV.parse(data, file: "sample.csv") }
    }

    @Test("a small hospitalisation file: oldest day first in the series, other age groups skipped and counted, NA, a quoted name")
    func sampleHospitalisation() throws {
        var rows = Self.hospitalisationRows()
        rows.append(Self.hospitalisationRow(0, 9, age: "05-14", cases: "7"))
        rows[3] = rows[3].replacingOccurrences(of: "Land 03", with: "\"Land, \"\"drei\"\"\"")
        rows[4] = Self.hospitalisationRow(0, 4, cases: "NA")
        let table = try HospitalisationCSV.parse(Self.file(Self.hospitalisationHeader, rows), file: "sample.csv")
        #expect(table.rows == 52)
        #expect(table.skippedRows == 1)
        let cases = try #require(table[Self.casesKey])
        let incidence = try #require(table[Self.incidenceKey])
        #expect(cases.firstDay == Self.day("2024-05-02"))
        #expect(cases.lastDay == Self.day("2024-05-04"))
        #expect(cases.regions == Self.regions)
        #expect(cases.values["09"] == [192, 191, 190])
        #expect(cases.value(region: "03", on: Self.day("2024-05-04")) == 130)
        #expect(cases.value(region: "04", on: Self.day("2024-05-04")) == nil)
        #expect(incidence.value(region: "04", on: Self.day("2024-05-04")) == 4.25)
        #expect(incidence.values["16"] == [16.25, 16.25, 16.25])

        // The same file with a byte order mark and CR LF line ends.
        let windows = Data([0xEF, 0xBB, 0xBF]) + Self.file(Self.hospitalisationHeader, rows, separator: "\r\n")
        #expect(try HospitalisationCSV.parse(windows, file: "sample.csv") == table)
    }

    @Test("a day without the 00+ row of a state is refused, naming the day and the state")
    func missingHospitalisationRow() {
        // Only another age group's row for Bavaria on 2024-05-03 ...
        let otherAge = Self.hospitalisationError { rows in rows[17 + 9] = Self.hospitalisationRow(1, 9, age: "05-14") }
        Self.check(otherAge, .missingDistricts, "2024-05-03 has no row for state 09, age group 00+")
        // ... or none at all.
        let none = Self.hospitalisationError { rows in _ = rows.remove(at: 17 + 9) }
        Self.check(none, .missingDistricts, "2024-05-03 has no row for state 09, age group 00+")
    }

    @Test("a value neither a non-negative number nor NA is refused, naming the line, the column and the value")
    func hospitalisationValueNotANumber() {
        let text = Self.hospitalisationError { rows in rows[5] = Self.hospitalisationRow(0, 5, cases: "abc") }
        Self.check(text, .invalidValue, "line 7:", "fixierte_7T_Hospitalisierung_Faelle 'abc' is not a number")
        let negative = Self.hospitalisationError { rows in rows[20] = Self.hospitalisationRow(1, 3, cases: "-3") }
        Self.check(negative, .invalidValue, "line 22:", "'-3'")
        let infinite = Self.hospitalisationError { rows in rows[0] = Self.hospitalisationRow(0, 0, cases: "1e400") }
        Self.check(infinite, .invalidValue, "line 2:", "'1e400'")
        let empty = Self.hospitalisationError { rows in rows[1] = Self.hospitalisationRow(0, 1, cases: "") }
        Self.check(empty, .invalidValue, "line 3:")
    }

    @Test("a bad day is refused, naming the line")
    func hospitalisationBadDay() {
        let error = Self.hospitalisationError { rows in rows[0] = rows[0].replacingOccurrences(of: "2024-05-04", with: "2024-02-30") }
        Self.check(error, .invalidValue, "line 2:", "Datum '2024-02-30'")
    }

    @Test("a renamed column is refused, naming the column")
    func hospitalisationRenamedColumn() {
        let header = Self.hospitalisationHeader.replacingOccurrences(of: ",fixierte_7T_Hospitalisierung_Inzidenz", with: ",fixierte_7T_Hosp_Inzidenz")
        let error = Self.hospitalisationError(header: header) { _ in }
        Self.check(error, .missingField, "sample.csv", "'fixierte_7T_Hospitalisierung_Inzidenz'", "renamed")
    }

    @Test("a state id outside 00...16 is refused, naming the line and the id")
    func hospitalisationStateOutOfRange() {
        let error = Self.hospitalisationError { rows in rows[3] = rows[3].replacingOccurrences(of: ",03,", with: ",17,") }
        Self.check(error, .invalidValue, "line 5:", "Bundesland_Id '17' out of range 00..16")
        let oneDigit = Self.hospitalisationError { rows in rows[9] = rows[9].replacingOccurrences(of: ",09,", with: ",9,") }
        Self.check(oneDigit, .invalidValue, "line 11:", "'9'")
    }

    @Test("a second 00+ row of a day and state is refused, naming both lines")
    func hospitalisationDuplicate() {
        let error = Self.hospitalisationError { rows in rows.append(rows[20]) }
        Self.check(error, .duplicateDistrict, "line 53:", "state 03", "2024-05-03", "line 22")
    }

    @Test("a row without the header's number of fields, or with broken quoting, is refused, naming the line")
    func hospitalisationShortRow() {
        let short = Self.hospitalisationError { rows in
            rows[2] = rows[2].split(separator: ",", omittingEmptySubsequences: false).dropLast().joined(separator: ",")
        }
        Self.check(short, .malformed, "line 4:", "7 fields, the header has 8")
        let unclosed = Self.hospitalisationError { rows in rows[6] = rows[6].replacingOccurrences(of: "Land 06", with: "\"Land 06") }
        Self.check(unclosed, .malformed, "line 8:")
        let stray = Self.hospitalisationError { rows in rows[6] = rows[6].replacingOccurrences(of: "Land 06", with: "Land \"06\"") }
        Self.check(stray, .malformed, "line 8:")
    }

    @Test("an empty file, a header alone, or no 00+ row is refused as empty")
    func hospitalisationEmpty() {
        Self.check(#expect(throws: DataError.self) { try HospitalisationCSV.parse(Data(), file: "sample.csv") }, .empty, "sample.csv")
        Self.check(#expect(throws: DataError.self) { try HospitalisationCSV.parse(Data([0xEF, 0xBB, 0xBF, 0x0A]), file: "sample.csv") }, .empty)
        let headerOnly = Data((Self.hospitalisationHeader + "\n").utf8)
        Self.check(#expect(throws: DataError.self) { try HospitalisationCSV.parse(headerOnly, file: "sample.csv") }, .empty)
        let otherAges = Self.hospitalisationError { rows in rows = rows.map { $0.replacingOccurrences(of: ",00+,", with: ",05-14,") } }
        Self.check(otherAges, .empty, "00+")
    }

    // MARK: - Intensive care: a small file

    static let intensiveCareHeader = "datum,bundesland_id,bundesland_name,behandlungsgruppe,anzahl_meldebereiche,faelle_covid_aktuell,intensivbetten_belegt"
    /// Oldest first, as the register writes them.
    static let intensiveCareDays = ["2024-05-02", "2024-05-03", "2024-05-04"]

    /// Patients `10 x state + day index`.
    static func intensiveCareRow(_ dayIndex: Int, _ state: Int, group: String = "Erwachsene", patients: String? = nil) -> String {
        let value = patients ?? String(10 * state + dayIndex)
        return "\(intensiveCareDays[dayIndex]),\(id(state)),Land \(id(state)),\(group),10,\(value),500"
    }

    /// The 16 states on each day: the row of day index `d` and state `s` is `rows[16 d + s - 1]`, on line `16 d + s + 1`.
    static func intensiveCareRows() -> [String] {
        intensiveCareDays.indices.flatMap { d in (1...16).map { intensiveCareRow(d, $0) } }
    }

    static func intensiveCareError(header: String = IndicatorCSVTests.intensiveCareHeader,
                                   _ edit: (inout [String]) -> Void) -> DataError? {
        var rows = intensiveCareRows()
        edit(&rows)
        let data = file(header, rows)
        return #expect(throws: DataError.self) { try IntensiveCareCSV.parse(data, file: "icu.csv") }
    }

    @Test("a small register file: treatment groups summed, NA leaves the state and Germany without a value that day")
    func sampleIntensiveCare() throws {
        var rows = Self.intensiveCareRows()
        rows.append(Self.intensiveCareRow(0, 9, group: "Kinder", patients: "3"))
        rows[16 + 4] = Self.intensiveCareRow(1, 5, patients: "NA")
        let table = try IntensiveCareCSV.parse(Self.file(Self.intensiveCareHeader, rows), file: "icu.csv")
        #expect(table.rows == 49)
        #expect(table.skippedRows == 0)
        let icu = try #require(table[Self.icuKey])
        #expect(icu.firstDay == Self.day("2024-05-02"))
        #expect(icu.lastDay == Self.day("2024-05-04"))
        #expect(icu.regions == Self.regions)
        #expect(icu.values["09"] == [93, 91, 92])
        #expect(icu.values["05"] == [50, nil, 52])
        // 10 x (1 + ... + 16) = 1360, plus the day index for each state, plus Bavaria's children.
        #expect(icu.values["00"] == [1363, nil, 1392])
    }

    @Test("register: a state id outside 01...16 (Germany 00 included) is refused")
    func intensiveCareStateOutOfRange() {
        let germany = Self.intensiveCareError { rows in rows[0] = rows[0].replacingOccurrences(of: ",01,", with: ",00,") }
        Self.check(germany, .invalidValue, "line 2:", "bundesland_id '00' out of range 01..16")
        let seventeen = Self.intensiveCareError { rows in rows[16] = rows[16].replacingOccurrences(of: ",01,", with: ",17,") }
        Self.check(seventeen, .invalidValue, "line 18:", "'17'")
    }

    @Test("register: a value not a non-negative integer, a duplicate row, a missing state, a short row, a renamed column, an empty file")
    func intensiveCareRefusals() {
        let fraction = Self.intensiveCareError { rows in rows[5] = Self.intensiveCareRow(0, 6, patients: "1.5") }
        Self.check(fraction, .invalidValue, "line 7:", "faelle_covid_aktuell '1.5'")
        let duplicate = Self.intensiveCareError { rows in rows.append(rows[0]) }
        Self.check(duplicate, .duplicateDistrict, "line 50:", "state 01", "Erwachsene", "line 2")
        let missing = Self.intensiveCareError { rows in _ = rows.remove(at: 16 + 8) }
        Self.check(missing, .missingDistricts, "2024-05-03 has no row for state 09")
        let short = Self.intensiveCareError { rows in rows[10] = "2024-05-02,11,Berlin" }
        Self.check(short, .malformed, "line 12:", "3 fields, the header has 7")
        let header = Self.intensiveCareHeader.replacingOccurrences(of: "faelle_covid_aktuell", with: "faelle_covid")
        let renamed = Self.intensiveCareError(header: header) { _ in }
        Self.check(renamed, .missingField, "'faelle_covid_aktuell'")
        Self.check(#expect(throws: DataError.self) { try IntensiveCareCSV.parse(Data(), file: "icu.csv") }, .empty)
        let headerOnly = Data((Self.intensiveCareHeader + "\r\n").utf8)
        Self.check(#expect(throws: DataError.self) { try IntensiveCareCSV.parse(headerOnly, file: "icu.csv") }, .empty)
    }

    // MARK: - The series

    @Test("kept as published: a value held keeps its day, a later file fills the rest, and the changed values are counted")
    func keepingPublished() {
        let kept = IndicatorSeries(key: Self.icuKey, firstDay: Self.day("2024-05-01"), lastDay: Self.day("2024-05-03"),
                                   values: ["09": [1, nil, 3], "10": [5, 5, 5], "12": [8, 8, 8]])
        let newer = IndicatorSeries(key: Self.icuKey, firstDay: Self.day("2024-05-02"), lastDay: Self.day("2024-05-04"),
                                    values: ["09": [2, 30, 4], "11": [7, 7, 7], "12": [nil, 8, 9]])
        let (merged, changed) = newer.keepingPublished(kept)
        #expect(merged.key == Self.icuKey)
        #expect(merged.firstDay == Self.day("2024-05-01"))
        #expect(merged.lastDay == Self.day("2024-05-04"))
        // 05-01 only kept; 05-02 kept had none: the newer file's; 05-03 kept's 3, not 30; 05-04 new.
        #expect(merged.values["09"] == [1, 2, 3, 4])
        #expect(merged.values["10"] == [5, 5, 5, nil])
        #expect(merged.values["11"] == [nil, 7, 7, 7])
        // The newer file's NA does not take a value held away.
        #expect(merged.values["12"] == [8, 8, 8, 9])
        // 09 on 05-03 (30 for 3) and 12 on 05-02 (NA for 8).
        #expect(changed == 2)

        #expect(newer.keepingPublished(nil).series == newer)
        #expect(newer.keepingPublished(nil).changedValues == 0)
        #expect(newer.keepingPublished(newer).series == newer)
        #expect(newer.keepingPublished(newer).changedValues == 0)
        // Another indicator's series is not this one's past.
        let other = IndicatorSeries(key: Self.casesKey, firstDay: Self.day("2024-05-01"), lastDay: Self.day("2024-05-01"), values: ["09": [99]])
        #expect(newer.keepingPublished(other).series == newer)
    }

    @Test("the newest value on or before a day and at most maxAge days older; value(on:) outside the range is nil")
    func latestValue() {
        let series = IndicatorSeries(key: Self.icuKey, firstDay: Self.day("2024-05-01"), lastDay: Self.day("2024-05-05"),
                                     values: ["09": [1, 2, nil, nil, 5], "10": [1]])
        let found = series.latest(region: "09", onOrBefore: Self.day("2024-05-04"), maxAge: 2)
        #expect(found?.day == Self.day("2024-05-02"))
        #expect(found?.value == 2)
        #expect(series.latest(region: "09", onOrBefore: Self.day("2024-05-04"), maxAge: 1)?.day == nil)
        #expect(series.latest(region: "09", onOrBefore: Self.day("2024-05-04"), maxAge: .max)?.day == Self.day("2024-05-02"))
        #expect(series.latest(region: "09", onOrBefore: Self.day("2024-05-05"), maxAge: 0)?.value == 5)
        // After the last day: the last day's value while it is young enough.
        #expect(series.latest(region: "09", onOrBefore: Self.day("2024-05-09"), maxAge: 4)?.day == Self.day("2024-05-05"))
        #expect(series.latest(region: "09", onOrBefore: Self.day("2024-05-09"), maxAge: 3)?.day == nil)
        #expect(series.latest(region: "09", onOrBefore: Self.day("2024-04-30"), maxAge: 10)?.day == nil)
        #expect(series.latest(region: "09", onOrBefore: Self.day("2024-05-04"), maxAge: -1)?.day == nil)
        #expect(series.latest(region: "07", onOrBefore: Self.day("2024-05-04"), maxAge: 2)?.day == nil)

        #expect(series.value(region: "09", on: Self.day("2024-05-01")) == 1)
        #expect(series.value(region: "09", on: Self.day("2024-04-30")) == nil)
        #expect(series.value(region: "09", on: Self.day("2024-05-06")) == nil)
        // A region's entries are padded to the range.
        #expect(series.values["10"] == [1, nil, nil, nil, nil])
        #expect(series.dayCount == 5)
    }
}
