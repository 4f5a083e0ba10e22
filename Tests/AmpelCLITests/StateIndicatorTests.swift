import AmpelTestSupport
import Foundation
import Testing

/// The hospital and intensive-care rule sets against the RKI's real files (the copies in
/// shared/), through the built binary, checked by a calculation of their own: the raw files
/// split by commas, the rules written out here as the Bavarian Verordnung and the federal
/// resolution state them.
@Suite struct StateIndicatorTests {
    /// The raw files, read without Ampel's readers.
    struct RawFiles {
        /// Day -> state -> (cases, incidence) of the `00+` rows, the fixed values.
        var hospital: [String: [String: (cases: Double?, incidence: Double?)]] = [:]
        /// Day -> state -> patients, summed over the treatment groups; `00` the sum of the 16 states.
        var icu: [String: [String: Double]] = [:]

        static let shared: RawFiles = {
            let data = RKIDistrictFile.sharedDataDirectory().appendingPathComponent("rki-github")
            var files = RawFiles()
            func rows(_ path: String) -> [(header: [String: Int], fields: [Substring])] {
                guard let text = try? String(contentsOf: data.appendingPathComponent(path), encoding: .utf8) else {
                    Issue.record("cannot read \(path) under \(data.path): the RKI's files are in ../shared/data/rki-github")
                    return []
                }
                var lines = text.split(separator: "\n", omittingEmptySubsequences: true)
                let header = Dictionary(uniqueKeysWithValues: lines.removeFirst().split(separator: ",").enumerated().map { (String($1), $0) })
                return lines.map { (header, $0.split(separator: ",", omittingEmptySubsequences: false)) }
            }
            for (header, f) in rows("hospitalisierungen/Aktuell_Deutschland_adjustierte-COVID-19-Hospitalisierungen.csv")
            where f[header["Altersgruppe"]!] == "00+" {
                files.hospital[String(f[header["Datum"]!]), default: [:]][String(f[header["Bundesland_Id"]!])] =
                    (Double(f[header["fixierte_7T_Hospitalisierung_Faelle"]!]), Double(f[header["fixierte_7T_Hospitalisierung_Inzidenz"]!]))
            }
            for (header, f) in rows("intensivregister/Intensivregister_Bundeslaender_Kapazitaeten.csv") {
                let day = String(f[header["datum"]!]), state = String(f[header["bundesland_id"]!])
                let patients = Double(f[header["faelle_covid_aktuell"]!])!
                files.icu[day, default: [:]][state, default: 0] += patients
                files.icu[day, default: [:]]["00", default: 0] += patients
            }
            return files
        }()

        /// The newest value on or before `day`, at most three days older, as Ampel's data day carries it.
        func latest<T>(_ table: [String: [String: T]], _ state: String, _ day: String, _ value: (T) -> Double?) -> (String, Double)? {
            var date = Self.date(day)
            for _ in 0...3 {
                let key = Self.iso(date)
                if let entry = table[key]?[state], let found = value(entry) { return (key, found) }
                date -= 86_400
            }
            return nil
        }

        static func date(_ iso: String) -> TimeInterval {
            let p = iso.split(separator: "-").map { Int($0)! }
            var c = DateComponents(); (c.year, c.month, c.day) = (p[0], p[1], p[2])
            var calendar = Calendar(identifier: .gregorian); calendar.timeZone = TimeZone(identifier: "UTC")!
            return calendar.date(from: c)!.timeIntervalSince1970
        }

        static func iso(_ time: TimeInterval) -> String {
            let f = DateFormatter(); f.dateFormat = "yyyy-MM-dd"; f.timeZone = TimeZone(identifier: "UTC"); f.locale = Locale(identifier: "en_US_POSIX")
            return f.string(from: Date(timeIntervalSince1970: time))
        }

        var days: [String] { Array(Set(icu.keys).union(hospital.keys)).sorted() }
    }

    /// The Krankenhausampel: red above 600 intensive-care patients, yellow above 1,200
    /// admissions in 7 days or (from 6 November 2021) above 450 patients, else green.
    static func krankenhausampel(day: String, cases: Double?, icu: Double?) -> String? {
        guard cases != nil || icu != nil else { return nil }
        if let icu, icu > 600 { return "red" }
        if let cases, cases > 1200 { return "yellow" }
        if let icu, icu > 450, day >= "2021-11-06" { return "yellow" }
        return "green"
    }

    /// The federal thresholds of 18 November 2021 on the state's hospitalisation incidence.
    static func hospitalisierung(_ incidence: Double?) -> String? {
        guard let incidence else { return nil }
        return incidence > 9 ? "darkred" : incidence > 6 ? "red" : incidence > 3 ? "yellow" : "green"
    }

    func states(_ rules: String, from: String, to: String) async throws -> [[String: Any]] {
        let out = try await AmpelBinary.run(["states", "--rules", rules, "--from", from, "--to", to, "--json"])
        #expect(out.exitCode == 0, "\(out.stderrText)")
        return try #require(JSONSerialization.jsonObject(with: out.stdout) as? [[String: Any]])
    }

    func value(_ report: [String: Any], _ name: String) -> (date: String?, value: Double?) {
        let indicator = (report["indicators"] as? [[String: Any]])?.first { $0["name"] as? String == name }
        return (indicator?["date"] as? String, indicator?["value"] as? Double)
    }

    @Test("every day of both files: the values the binary reports are the files', the phases of both sets the rules'")
    func everyDayEqualsAnIndependentCalculation() async throws {
        let raw = RawFiles.shared
        let days = raw.days
        let first = try #require(days.first), last = try #require(days.last)
        #expect(first == "2020-03-20" && last == "2026-08-22")
        for rules in ["krankenhausampel-2021", "hospitalisierung-2021"] {
            let reports = try await states(rules, from: first, to: last)
            #expect(reports.count == days.count * 17, "\(rules): 17 reports (Germany and 16 states) on each of \(days.count) days")
            var checked = (values: 0, phases: 0)
            for report in reports {
                let day = try #require(report["dataDate"] as? String), state = try #require(report["id"] as? String)
                let cases = raw.latest(raw.hospital, state, day) { $0.cases }
                let incidence = raw.latest(raw.hospital, state, day) { $0.incidence }
                let icu = raw.latest(raw.icu, state, day) { $0 }
                for (name, expected) in [("hospitalisation_cases_7d", cases), ("hospitalisation_incidence_7d", incidence), ("icu_covid_patients", icu)] {
                    let got = value(report, name)
                    #expect(got.value == expected?.1 && got.date == expected?.0, "\(rules) \(day) \(state) \(name): \(got) against the file's \(String(describing: expected))")
                    checked.values += 1
                }
                let phase: String?
                switch rules {
                case "krankenhausampel-2021": phase = state == "09" ? Self.krankenhausampel(day: day, cases: cases?.1, icu: icu?.1) : nil
                default: phase = state == "00" ? nil : Self.hospitalisierung(incidence?.1)
                }
                #expect(report["phase"] as? String == phase, "\(rules) \(day) \(state): \(String(describing: report["phase"])) against \(String(describing: phase))")
                if phase != nil { checked.phases += 1 }
            }
            #expect(checked.phases > (rules == "krankenhausampel-2021" ? 2_300 : 16 * 1_300), "\(rules): \(checked)")
        }
    }

    @Test("a district's signal is its state's: München on days across the years, with the decisive indicator and completeness")
    func districtSignalsCarryTheirStatesIndicators() async throws {
        let raw = RawFiles.shared
        for day in ["2020-12-01", "2021-11-05", "2021-11-06", "2021-11-10", "2021-12-20", "2022-06-01", "2023-01-05", "2024-02-01", "2026-08-22"] {
            let out = try await AmpelBinary.run(["check", "--district", "09162", "--rules", "krankenhausampel-2021", "--date", day, "--json"])
            #expect(out.exitCode == 0, "\(day): \(out.stderrText)")
            let signal = try #require(JSONSerialization.jsonObject(with: out.stdout) as? [String: Any])
            let cases = raw.latest(raw.hospital, "09", day) { $0.cases }, icu = raw.latest(raw.icu, "09", day) { $0 }
            let phase = Self.krankenhausampel(day: day, cases: cases?.1, icu: icu?.1)
            #expect(signal["phase"] as? String == phase, "\(day)")
            #expect(signal["complete"] as? Bool == (cases != nil && icu != nil), "\(day)")
            let indicators = try #require(signal["indicators"] as? [[String: Any]])
            #expect(Set(indicators.compactMap { $0["name"] as? String }) == ["hospitalisation_cases_7d", "icu_covid_patients"])
            for indicator in indicators {
                #expect(indicator["level"] as? String == "state" && indicator["region"] as? String == "09")
                let decisive = indicator["decisive"] as? Bool == true
                let value = indicator["value"] as? Double
                switch (phase, indicator["name"] as? String) {
                case ("red", "icu_covid_patients"): #expect(decisive && value! > 600, "\(day)")
                case ("red", _): #expect(!decisive, "\(day): only the intensive-care patients make red")
                case ("green", _): #expect(decisive == (value != nil), "\(day): in green every indicator with a value keeps it green")
                default: break
                }
            }
        }
        // 10 November 2021: red by 653 patients, said in the reason.
        let red = try await AmpelBinary.run(["check", "--district", "09162", "--rules", "krankenhausampel-2021", "--date", "2021-11-10", "--json"])
        let signal = try #require(JSONSerialization.jsonObject(with: red.stdout) as? [String: Any])
        #expect(signal["phase"] as? String == "red")
        #expect(signal["reason"] as? String == "Red: 653 COVID-19 patients in intensive care in Bayern, above 600")
        #expect(signal["complete"] as? Bool == false, "no hospitalisation values before 2023")
    }

    @Test("the whole of Germany: a district in Nordrhein-Westfalen takes its state's hospitalisation incidence")
    func hospitalisationSetOverGermany() async throws {
        let raw = RawFiles.shared
        let out = try await AmpelBinary.run(["districts", "--rules", "hospitalisierung-2021", "--date", "2023-01-05", "--json"])
        #expect(out.exitCode == 0, "\(out.stderrText)")
        let rows = try #require(JSONSerialization.jsonObject(with: out.stdout) as? [[String: Any]])
        #expect(rows.count == 400)
        for row in rows {
            let state = String((row["ags"] as! String).prefix(2))
            let expected = Self.hospitalisierung(raw.latest(raw.hospital, state, "2023-01-05") { $0.incidence }?.1)
            #expect(row["phase"] as? String == expected, "\(row["ags"]!)")
        }
    }

    @Test("before the data begins, and a source without state indicators, are errors that say so")
    func errorsSayWhatIsMissing() async throws {
        let early = try await AmpelBinary.run(["check", "--district", "09162", "--rules", "krankenhausampel-2021", "--date", "2020-01-01"])
        #expect(early.exitCode != 0)
        #expect(early.stderrText.contains("the data begins on 2020-03-20"))
        let history = try await AmpelBinary.run(["districts", "--rules", "krankenhausampel-2021", "--source", "history"])
        #expect(history.exitCode != 0)
        #expect(history.stderrText.contains("use --source bundled (the default) or rki"))
        let rules = try await AmpelBinary.run(["rules", "--rules", "krankenhausampel-2021", "--json"])
        let set = try #require(JSONSerialization.jsonObject(with: rules.stdout) as? [String: Any])
        let phases = try #require(set["phases"] as? [[String: Any]])
        let red = try #require(phases.first { $0["id"] as? String == "red" })
        let when = try #require(red["when"] as? [[String: Any]])
        #expect(when.count == 1 && when[0]["indicator"] as? String == "icu_covid_patients" && when[0]["above"] as? Double == 600)
    }

    @Test("ampel fetch caches the live files for a set of state indicators; check answers from that cache, stale, when they cannot be had")
    func fetchFillsTheCacheCheckFallsBackToIt() async throws {
        let data = RKIDistrictFile.sharedDataDirectory().appendingPathComponent("rki-github")
        let hospital = data.appendingPathComponent("hospitalisierungen/Aktuell_Deutschland_adjustierte-COVID-19-Hospitalisierungen.csv").absoluteString
        let icu = data.appendingPathComponent("intensivregister/Intensivregister_Bundeslaender_Kapazitaeten.csv").absoluteString
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-fetch-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let fetch = try await AmpelBinary.run(["fetch", "--rules", "krankenhausampel-2021", "--hospitalisation-url", hospital, "--icu-url", icu,
                                               "--state-dir", state.path, "--json"])
        #expect(fetch.exitCode == 0, "\(fetch.stderrText)")
        let summary = try #require(JSONSerialization.jsonObject(with: fetch.stdout) as? [String: Any])
        #expect(summary["date"] as? String == "2026-08-22")
        #expect((summary["cache"] as? String)?.hasSuffix("/indicators/incidence.json") == true)
        let refusing = try RefusingPort()
        let check = try await AmpelBinary.run(["check", "--district", "09162", "--rules", "krankenhausampel-2021", "--source", "rki",
                                               "--hospitalisation-url", "http://127.0.0.1:\(refusing.port)/h.csv",
                                               "--icu-url", "http://127.0.0.1:\(refusing.port)/i.csv", "--timeout", "2",
                                               "--state-dir", state.path, "--json"])
        #expect(check.exitCode == 0, "\(check.stderrText)")
        let signal = try #require(JSONSerialization.jsonObject(with: check.stdout) as? [String: Any])
        #expect(signal["stale"] as? Bool == true)
        #expect(signal["dataDate"] as? String == "2026-08-22")
        #expect(check.stderrText.contains("connection refused"))
    }
}
