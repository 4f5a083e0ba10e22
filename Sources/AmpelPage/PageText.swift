import AmpelCore
import AmpelDomain
import Foundation

/// The page's own words in German and English (the rules' texts come from the rule set).
public struct PageText: Sendable {
    public let language: Language
    /// The rule set's region, which the title and the map name.
    public let region: Region

    public init(_ language: Language, region: Region = .bavaria) {
        self.language = language
        self.region = region
    }

    /// The region's name in the page's language (the rule set names it in German).
    private var regionName: String {
        switch region.name {
        case "Bayern": t("Bayern", "Bavaria")
        case "Deutschland": t("Deutschland", "Germany")
        default: region.name
        }
    }

    private func t(_ de: String, _ en: String) -> String { language == .de ? de : en }

    public var title: String { t("Ampel – Lage in \(regionName)", "Ampel – status in \(regionName)") }
    public var tagline: String { t("Corona-Ampel je Landkreis, live aus dem Daemon", "Corona traffic light per district, live from the daemon") }
    public var map: String { t("Karte", "Map") }
    public var mapLabel: String { t("Karte der Landkreise (\(regionName)), gefärbt nach Phase", "Map of the districts (\(regionName)), coloured by phase") }
    public var districts: String { t("Landkreise", "Districts") }
    public var district: String { t("Landkreis", "District") }
    public var name: String { t("Name", "Name") }
    public var incidence: String { t("Inzidenz", "Incidence") }
    public var incidenceLong: String { t("7-Tage-Inzidenz je 100.000", "7-day incidence per 100,000") }
    public var phase: String { t("Phase", "Phase") }
    public var dataDate: String { t("Datenstand", "Data date") }
    public var filterDistricts: String { t("Landkreis suchen …", "Filter districts …") }
    public var devices: String { t("Geräte", "Devices") }
    public var searchDevices: String { t("Gerät suchen …", "Search devices …") }
    public var key: String { t("Schlüssel", "Key") }
    public var lastFix: String { t("Letzte Position", "Last fix") }
    public var lang: String { t("Sprache", "Language") }
    public var previous: String { t("Zurück", "Previous") }
    public var next: String { t("Weiter", "Next") }
    public var noDevices: String { t("Keine Geräte", "No devices") }
    public var lamps: String { t("Lampen", "Lamps") }
    public var driver: String { t("Treiber", "Driver") }
    public var follows: String { t("Folgt", "Follows") }
    public var status: String { t("Status", "Status") }
    public var lastColour: String { t("Letzte Farbe", "Last colour") }
    public var online: String { t("online", "online") }
    public var offline: String { t("offline", "offline") }
    public var noLamps: String { t("Keine Lampen eingerichtet", "No lamps configured") }
    public var bridge: String { t("Bridge", "Bridge") }
    public var source: String { t("Datenquelle", "Data source") }
    public var age: String { t("Alter", "Age") }
    public var lastError: String { t("Letzter Fehler", "Last error") }
    public var device: String { t("Gerät", "Device") }
    public var dataState: String { t("Zustand", "State") }
    public var blinking: String { t("blinkt", "blinking") }
    public var lastRefresh: String { t("Letzte Abfrage", "Last refresh") }
    public var lastCheck: String { t("Zuletzt geprüft", "Last checked") }
    public var held: String { t("Zurückgehalten", "Held back") }
    public var stateRecovered: String { t("Zustand wiederhergestellt", "State recovered") }
    public var counters: String { t("Zähler", "Counters") }
    public var errors: String { t("Letzte Fehler", "Recent errors") }
    public var noErrors: String { t("Keine Fehler", "No errors") }
    public var stale: String { t("veraltet", "stale") }
    public var current: String { t("aktuell", "current") }
    public var staleBanner: String {
        t("Die Daten sind veraltet: Die Karte zeigt den letzten bekannten Stand, nicht die aktuelle Lage.",
          "The data is stale: the map shows the last known figures, not the current situation.")
    }
    public var live: String { t("live", "live") }
    public var disconnected: String { t("keine Verbindung", "disconnected") }
    public var legend: String { t("Legende", "Legend") }
    public var rulesInForce: String { t("Geltende Regeln", "Rules in force") }
    public var always: String { t("Immer", "Always") }
    public var history: String { t("Verlauf", "History") }
    public var historyNote: String {
        t("Tägliche 7-Tage-Inzidenz des RKI (fixierte Werte), 18.11.2020 bis 22.11.2021; dahinter die Phasen des Regelwerks.",
          "The RKI's daily 7-day incidence (fixed values), 2020-11-18 to 2021-11-22; behind it the rule set's phases.")
    }
    /// Under the chart when the data in force is of a day the bundled history does not cover.
    public func dataDayOutsideHistory(_ day: Day) -> String {
        t("Der Datenstand \(date(day)) liegt außerhalb des Verlaufs; Phase und Inzidenz oben sind die dieses Tages.",
          "The data date \(date(day)) lies outside the history; the phase and incidence above are that day's.")
    }
    public var noHistory: String { t("Für diesen Landkreis gibt es keinen Verlauf.", "There is no history for this district.") }
    public var back: String { t("Zur Übersicht", "Back to the overview") }
    public var attribution: String {
        t("Daten: Robert Koch-Institut (RKI), dl-de/by-2-0. Geometrie: © GeoBasis-DE / BKG, dl-de/by-2-0.",
          "Data: Robert Koch-Institut (RKI), dl-de/by-2-0. Geometry: © GeoBasis-DE / BKG, dl-de/by-2-0.")
    }
    public var ago: String { t("vor", "ago") }
    public var never: String { t("nie", "never") }
    public var ruleSet: String { t("Regelwerk", "Rule set") }
    public var otherLanguage: String { t("English", "Deutsch") }

    /// The short name of a district's phase.
    public func phaseName(_ phase: DistrictStatus.Phase) -> String {
        switch phase {
        case .phase(.green): t("Grün", "Green")
        case .phase(.yellow): t("Gelb", "Yellow")
        case .phase(.red): t("Rot", "Red")
        case .phase(.darkred): t("Dunkelrot", "Dark red")
        case .outside: t("Außerhalb", "Outside region")
        case .noData: t("Keine Daten", "No data")
        }
    }

    /// A day as each language writes it: `01.03.2021` in German, `2021-03-01` in English.
    public func date(_ day: Day) -> String {
        guard language == .de else { return day.iso }
        let iso = day.iso
        return "\(iso.dropFirst(8)).\(iso.dropFirst(5).prefix(2)).\(iso.prefix(4))"
    }

    /// `152,3` in German, `152.3` in English: one decimal, as the RKI dashboard shows it.
    public func incidence(_ value: Double?) -> String {
        guard let value, value.isFinite else { return "–" }
        let tenths = Int((value * 10).rounded())
        let whole = tenths / 10, fraction = abs(tenths % 10)
        var digits = String(whole)
        // Group thousands the way each language does (1.234,5 / 1,234.5).
        let separator: Character = language == .de ? "." : ","
        var grouped = ""
        for (i, c) in digits.reversed().enumerated() {
            if i > 0, i % 3 == 0 { grouped.append(separator) }
            grouped.append(c)
        }
        digits = String(grouped.reversed())
        return digits + (language == .de ? "," : ".") + String(fraction)
    }

    /// The strings the page's script needs, as a JSON object.
    func scriptStrings(_ json: inout JSONWriter) {
        let pairs: [(String, String)] = [
            ("incidence", incidence), ("phase", phase), ("dataDate", dataDate), ("noDevices", noDevices),
            ("noLamps", noLamps), ("online", online), ("offline", offline), ("noErrors", noErrors),
            ("stale", stale), ("current", current), ("live", live), ("disconnected", disconnected),
            ("ago", ago), ("never", never), ("green", phaseName(.phase(.green))), ("yellow", phaseName(.phase(.yellow))),
            ("red", phaseName(.phase(.red))), ("darkred", phaseName(.phase(.darkred))), ("outside", phaseName(.outside)),
            ("none", phaseName(.noData)),
        ]
        json.raw("{")
        for (i, pair) in pairs.enumerated() {
            if i > 0 { json.raw(",") }
            json.string(pair.0)
            json.raw(":")
            json.string(pair.1)
        }
        json.raw("}")
    }
}

/// Chooses the page language: `?lang=` (the choice made on the page, by its language link)
/// wins, then the daemon's configured `lang`; only where none is configured the first language
/// of `Accept-Language` (by its q values) that Ampel speaks, else English.
public enum PageLanguage {
    public static func choose(query lang: String?, configured: Language? = nil, acceptLanguage: String?) -> Language {
        if let lang, let language = Language(known: lang) { return language }
        if let configured { return configured }
        guard let header = acceptLanguage else { return .en }
        var best: (language: Language, q: Double)?
        for item in header.split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let tag = parts.first, let language = Language(known: String(tag)) else { continue }
            var q = 1.0
            for parameter in parts.dropFirst() where parameter.hasPrefix("q=") {
                q = Double(parameter.dropFirst(2)) ?? 0
            }
            guard q > 0 else { continue }
            // The first of equal q values wins: browsers list the preferred one first.
            if q > (best?.q ?? 0) { best = (language, q) }
        }
        return best?.language ?? .en
    }
}
