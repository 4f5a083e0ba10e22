@testable import AmpelData
import AmpelDomain
import Foundation
import Testing

/// The streaming reader of the RKI's district file: what it keeps, and every way a file is rejected.
@Suite struct RKIDistrictCSVTests {
    static let header = "Meldedatum,Landkreis_id,Bevoelkerung,Faelle_gesamt,Faelle_neu,Faelle_7-Tage,Inzidenz_7-Tage"

    /// A small file in the schema: every German district and the two pseudo-ids on each day,
    /// incidence `base + district number / 10 + day index`.
    static func file(days: [String], order: Order = .byDay, edit: (inout [String]) -> Void = { _ in }) -> String {
        let codes = DistrictDirectory.germany.codes + ["17000", "u"]
        var rows: [String] = []
        func row(_ dayIndex: Int, _ day: String, _ code: String) -> String {
            let incidence = Double(Int(code) ?? 7) / 1000 + Double(dayIndex)
            let text = String(format: "%.1f", incidence)
            return "\(day),\(code),100000,\(dayIndex * 5),\(dayIndex),\(Int(incidence)),\(text)"
        }
        switch order {
        case .byDay:
            for (i, day) in days.enumerated() { for code in codes { rows.append(row(i, day, code)) } }
        case .byDistrict:
            for code in codes { for (i, day) in days.enumerated() { rows.append(row(i, day, code)) } }
        }
        edit(&rows)
        return ([header] + rows).joined(separator: "\n") + "\n"
    }

    enum Order { case byDay, byDistrict }

    static func read(_ text: String, window: Int = 3, chunk: Int = 1 << 16, region: Region = .bavaria) throws(DataError) -> RKIDistrictCSV.Table {
        let reader = RKIDistrictCSV(windowDays: window)
        let bytes = Array(text.utf8)
        var start = 0
        while start < bytes.count {
            let end = min(start + chunk, bytes.count)
            try reader.consume(Data(bytes[start..<end]))
            start = end
        }
        return try reader.finish(region: region)
    }

    static let days = ["2026-08-18", "2026-08-19", "2026-08-20", "2026-08-21", "2026-08-22"]

    @Test("the reader's literal constants: the base day is 2000-01-01, each power of ten the exact one")
    func constants() {
        #expect(RKIDistrictCSV.baseDay == Int32(Day(year: 2000, month: 1, day: 1)!.daysSinceEpoch))
        for n in 1...22 { #expect(RKIDistrictCSV.powerOfTen(n) == pow(10, Double(n)), "10^\(n)") }
    }

    @Test("the newest day and the window before it, every district joined with its name; the pseudo-ids skipped and counted")
    func keepsTheWindow() throws {
        let table = try Self.read(Self.file(days: Self.days), window: 3)
        #expect(table.newestDay == Day(iso: "2026-08-22"))
        #expect(table.datasets.map(\.date.iso) == ["2026-08-20", "2026-08-21", "2026-08-22"])
        #expect(table.rows == 5 * 402)
        #expect(table.skippedRows == 10)
        #expect(table.skippedCodes == ["17000", "u"])
        let newest = try #require(table.datasets.last)
        #expect(newest.districts.count == 400)
        let munich = try #require(newest["09162"])
        #expect(munich.district.name == "SK München")
        #expect(munich.district.state == "Bayern")
        #expect(munich.district.population == 100_000)
        #expect(munich.incidence == Double(String(format: "%.1f", 9162.0 / 1000 + 4)))
        #expect(newest.source == "rki")
        // The state's own incidence from its districts' cases and population.
        #expect(munich.stateIncidence != nil)
    }

    @Test("the same table whatever the chunk boundaries and the row order")
    func chunksAndOrder() throws {
        let text = Self.file(days: Self.days)
        let whole = try Self.read(text)
        for chunk in [1, 2, 7, 63, 4096] {
            let split = try Self.read(text, chunk: chunk)
            #expect(split.datasets == whole.datasets, "chunk \(chunk)")
        }
        let byDistrict = try Self.read(Self.file(days: Self.days, order: .byDistrict))
        #expect(byDistrict.datasets == whole.datasets)
        // CRLF line ends, a BOM, quoted fields and no line end at the end.
        let windows = "\u{FEFF}" + text.replacingOccurrences(of: "\n", with: "\r\n").replacingOccurrences(of: ",09162,", with: ",\"09162\",")
        #expect(try Self.read(String(windows.dropLast(2))).datasets == whole.datasets)
    }

    @Test("a value with more digits or a fraction reads as Double(String) reads it")
    func numbersAsWritten() throws {
        let values = ["0", "0.1", "103", "111.1", "12.345678901234", "99999.9", "1e2", "7."]
        for value in values {
            let text = Self.file(days: ["2026-08-22"]) { rows in
                rows = rows.map { $0.hasPrefix("2026-08-22,09162,") ? "2026-08-22,09162,100000,1,1,1,\(value)" : $0 }
            }
            let table = try Self.read(text)
            #expect(table.datasets.last?["09162"]?.incidence == Double(value), "\(value)")
        }
    }

    @Test("every broken file is rejected with its reason", arguments: [
        ("renamed column", DataError.Reason.missingField),
        ("duplicate row", .duplicateDistrict),
        ("duplicate row outside the window", .duplicateDistrict),
        ("unparsable number", .invalidValue),
        ("negative number", .invalidValue),
        ("bad day", .invalidValue),
        ("header only", .empty),
        ("empty file", .empty),
        ("missing Bavarian district", .missingDistricts),
        ("row cut short", .malformed),
    ])
    func rejections(_ fault: String, _ reason: DataError.Reason) {
        var text = Self.file(days: Self.days)
        switch fault {
        case "renamed column": text = text.replacingOccurrences(of: "Inzidenz_7-Tage", with: "Inzidenz_7_Tage")
        case "duplicate row": text += "2026-08-22,09162,100000,1,1,1,2.0\n"
        case "duplicate row outside the window": text += "2026-08-18,01001,100000,1,1,1,2.0\n"
        case "unparsable number": text = Self.replacing("2026-08-20,09184,") { $0.replacingOccurrences(of: ",100000,", with: ",1OOOOO,") }
        case "negative number": text = Self.replacing("2026-08-21,09184,") { _ in "2026-08-21,09184,100000,1,1,1,-1.5" }
        case "bad day": text = Self.replacing("2026-08-19,09184,") { "2026-13-19" + $0.dropFirst(10) }
        case "header only": text = Self.header + "\n"
        case "empty file": text = ""
        case "missing Bavarian district": text = Self.file(days: Self.days) { rows in rows.removeAll { $0.hasPrefix("2026-08-22,09780,") } }
        case "row cut short": text = String(text.dropLast(8))
        default: Issue.record("unknown fault \(fault)")
        }
        do {
            let table = try Self.read(text)
            Issue.record("\(fault) was accepted: \(table.newestDay)")
        } catch {
            #expect(error.reason == reason, "\(fault): \(error.message)")
        }
    }

    /// The file with the row starting with `prefix` rewritten.
    static func replacing(_ prefix: String, _ change: @escaping (String) -> String) -> String {
        file(days: days) { rows in rows = rows.map { $0.hasPrefix(prefix) ? change($0) : $0 } }
    }

    @Test("a Bavarian district missing from the newest day does not matter to a region without it")
    func missingOutsideTheRegion() throws {
        let text = Self.file(days: Self.days) { rows in rows.removeAll { $0.hasPrefix("2026-08-22,01001,") } }
        #expect(try Self.read(text).newestDay == Day(iso: "2026-08-22"))
        #expect(throws: DataError.self) { try Self.read(text, region: .germany) }
    }
}
