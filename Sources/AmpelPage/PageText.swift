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
    public var journal: String { t("Journal nicht schreibbar", "Journal not writable") }
    public var device: String { t("Gerät", "Device") }
    /// The bridge card's fact that names the kind of data (``kindName(_:)``).
    public var dataKind: String { t("Datenart", "Data kind") }
    public var blinking: String { t("blinkt", "blinking") }
    public var lastRefresh: String { t("Letzte Abfrage", "Last refresh") }
    public var lastCheck: String { t("Zuletzt geprüft", "Last checked") }
    public var held: String { t("Zurückgehalten", "Held back") }
    public var stateRecovered: String { t("Zustand wiederhergestellt", "State recovered") }
    public var counters: String { t("Zähler", "Counters") }
    public var errors: String { t("Letzte Fehler", "Recent errors") }
    public var noErrors: String { t("Keine Fehler", "No errors") }
    public var stale: String { t("veraltet", "stale") }
    /// The header's pill while the page's polls are answered: the page's link to the daemon,
    /// not the data (the data badge says what the data is; "live" there would mislead).
    public var connected: String { t("verbunden", "connected") }
    public var disconnected: String { t("keine Verbindung", "disconnected") }
    public var legend: String { t("Legende", "Legend") }
    public var rulesInForce: String { t("Geltende Regeln", "Rules in force") }
    public var always: String { t("Immer", "Always") }
    public var history: String { t("Verlauf", "History") }
    public var countryAndStates: String { t("Deutschland und Länder", "Germany and states") }
    public var noValue: String { t("kein Wert", "no value") }
    public var statesNote: String {
        t("Krankenhausaufnahmen und Intensivpatienten je Land, wie das RKI sie veröffentlicht (Robert Koch-Institut, CC BY 4.0); die Linie zeigt die letzten 14 Tage.",
          "Hospital admissions and intensive-care patients per state as the RKI publishes them (Robert Koch-Institut, CC BY 4.0); the line shows the last 14 days.")
    }

    /// A value with up to two decimals, a decimal comma in German.
    public func number(_ value: Double) -> String { NumberText.short(value, language) }
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
    public var attribution: String { attribution(stateIndicators: false) }

    /// The credit line: the incidence data of 2020/21 are dl-de/by-2-0, the maintained hospital
    /// and intensive-care datasets CC BY 4.0.
    public func attribution(stateIndicators: Bool) -> String {
        let licence = stateIndicators ? "CC BY 4.0" : "dl-de/by-2-0"
        return t("Daten: Robert Koch-Institut (RKI), \(licence). Geometrie: © GeoBasis-DE / BKG, dl-de/by-2-0.",
                 "Data: Robert Koch-Institut (RKI), \(licence). Geometry: © GeoBasis-DE / BKG, dl-de/by-2-0.")
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

    // MARK: The data in force: the header's badge and the lines under it

    /// The kind of data as the badge and the bridge card name it.
    public func kindName(_ kind: PageDataKind) -> String {
        switch kind {
        case .live: t("Live", "Live")
        case .standIn: t("Ersatzdaten", "Stand-in")
        case .snapshot: t("Momentaufnahme", "Snapshot")
        case .history: t("Verlauf", "History")
        case .replay: t("Wiederholung", "Replay")
        }
    }

    /// What the kind means, on hovering the badge.
    public func kindTitle(_ kind: PageDataKind) -> String {
        switch kind {
        case .live: t("Von der Live-Quelle abgerufen", "Fetched from the live source")
        case .standIn: t("Mitgelieferte Daten, die einspringen, bis die Live-Quelle antwortet",
                         "Bundled data, standing in until the live source answers")
        case .snapshot: t("Eine mitgelieferte Momentaufnahme, wie eingestellt: Sie ändert sich nicht",
                          "A bundled snapshot, as configured: it does not change")
        case .history: t("Ein Tag des mitgelieferten täglichen Verlaufs, wie eingestellt",
                         "A day of the bundled daily history, as configured")
        case .replay: t("Eine Wiederholung des mitgelieferten Verlaufs", "A replay through the bundled history")
        }
    }

    /// The kind as the notice lines say what the map shows: "the map shows `bundled data` of …".
    public func kindData(_ kind: PageDataKind) -> String {
        switch kind {
        case .live: t("die zuletzt abgerufenen Daten", "the last fetched data")
        case .standIn: t("mitgelieferte Daten", "bundled data")
        case .snapshot: t("die mitgelieferte Momentaufnahme", "the bundled snapshot")
        case .history: t("den mitgelieferten Verlauf", "the bundled history")
        case .replay: t("wiederholte Daten", "replayed data")
        }
    }

    /// The live sources by the names a user knows (`data.source`, or a cache's source).
    public static let sourceNames = ["arcgis": "RKI (ArcGIS)", "rki": "RKI"]

    /// Who failed or is waited for. A stand-in's source is the bundled snapshot's
    /// (`snapshot:2020-11-23`), which names no live source; both live sources Ampel has are
    /// the RKI's, so a live or stand-in kind says "RKI". Any other source by its own name.
    public func sourceName(_ data: PageDataStatus) -> String {
        if let name = Self.sourceNames[data.source] { return name }
        if data.kind == .live || data.kind == .standIn { return Self.sourceNames["rki"] ?? "RKI" }
        return data.source.isEmpty ? "–" : data.source
    }

    /// A data day in the page's language (``date(_:)``); a text that is no day as it is, `–` for none.
    public func day(_ iso: String?) -> String {
        guard let iso else { return "–" }
        guard iso.utf8.count == 10, let day = Day(iso: iso) else { return iso }
        return date(day)
    }

    /// The header's badge: the kind of data and its day (`Snapshot · 2020-11-05`), `(stale)`
    /// after a live kind that is. Green only for live data that is not stale: amber for stale
    /// live data and a stand-in, neutral for data chosen to stay as it is.
    public func badge(_ data: PageDataStatus) -> DataBadge {
        let live = data.kind == .live
        let text = kindName(data.kind) + " · " + day(data.dataDate) + (live && data.stale ? " (" + stale + ")" : "")
        let tone: DataBadge.Tone = live && !data.stale ? .ok : live || data.kind == .standIn ? .warn : .fixed
        return DataBadge(text: text, tone: tone, title: kindTitle(data.kind))
    }

    /// The prefixes of the daemon's reasons that say the source was not reached (DataHTTP's
    /// `cannot reach host: …`, `no complete answer from host within …`, `no connection within
    /// …`), as against an answer that was unusable (`answered HTTP 404`, a malformed file).
    public static let unreachableReasons = ["cannot reach ", "no complete answer ", "no connection "]

    var unreachableLine: String {
        t("{source} nicht erreichbar: {error}; die Karte zeigt {data} vom {day}",
          "{source} unreachable: {error}; the map shows {data} of {day}")
    }
    var failedLine: String {
        t("{source} lieferte keine brauchbaren Daten: {error}; die Karte zeigt {data} vom {day}",
          "{source} gave no usable data: {error}; the map shows {data} of {day}")
    }
    var waitingLine: String {
        t("Warten auf die erste Antwort von {source}: Die Karte zeigt {data} vom {day}",
          "Waiting for the first answer of {source}: the map shows {data} of {day}")
    }
    var staleLine: String {
        t("Die Daten vom {day} sind älter als erlaubt (data.max_age): Die Lage kann sich seither geändert haben",
          "The data of {day} is older than allowed (data.max_age): the situation may have changed since")
    }
    var heldLine: String {
        t("Eine neue Veröffentlichung von {source} wird zurückgehalten: {held}; die Karte zeigt {data} vom {day}",
          "A new publication of {source} is held back: {held}; the map shows {data} of {day}")
    }

    /// The lines under the header, each with its element id: why the live source failed
    /// (`data-error`: "RKI unreachable: …; the map shows bundled data of 2020-11-23"), else
    /// why the data is stale (`data-stale`: waiting for a first answer, or older than
    /// allowed); and a held publication (`data-held`) on a line of its own. None for data
    /// that is as it should be.
    public func notices(_ data: PageDataStatus) -> [DataNotice] {
        let values = ["source": sourceName(data), "data": kindData(data.kind), "day": day(data.dataDate),
                      "error": data.lastError ?? "", "held": data.held ?? ""]
        var lines: [DataNotice] = []
        if let error = data.lastError, !error.isEmpty {
            let unreachable = Self.unreachableReasons.contains { error.hasPrefix($0) }
            lines.append(DataNotice(id: "data-error", text: Self.fill(unreachable ? unreachableLine : failedLine, values)))
        } else if data.stale {
            lines.append(DataNotice(id: "data-stale", text: Self.fill(data.kind == .standIn ? waitingLine : staleLine, values)))
        }
        if let held = data.held, !held.isEmpty {
            lines.append(DataNotice(id: "data-held", text: Self.fill(heldLine, values)))
        }
        return lines
    }

    /// `template` with each `{name}` of `values` replaced, in one pass: a value that holds
    /// `{day}` itself (an error text from outside) stays as it is. The script's `fill` does the same.
    static func fill(_ template: String, _ values: [String: String]) -> String {
        var out = ""
        var rest = template[...]
        while let open = rest.firstIndex(of: "{") {
            out += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}"), let value = values[String(rest[rest.index(after: open)..<close])] else {
                out.append("{")
                rest = rest[rest.index(after: open)...]
                continue
            }
            out += value
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    /// What the script needs to build the badge and the lines as ``badge(_:)`` and
    /// ``notices(_:)`` do: the same words and templates, as a JSON object.
    func dataStrings(_ json: inout JSONWriter) {
        func table(_ words: (PageDataKind) -> String) {
            json.raw("{")
            for (i, kind) in PageDataKind.allCases.enumerated() {
                if i > 0 { json.raw(",") }
                json.string(kind.rawValue)
                json.raw(":")
                json.string(words(kind))
            }
            json.raw("}")
        }
        json.raw(#"{"lang":"#)
        json.string(language.rawValue)
        json.raw(#","kinds":"#)
        table(kindName)
        json.raw(#","titles":"#)
        table(kindTitle)
        json.raw(#","data":"#)
        table(kindData)
        json.raw(#","sources":{"#)
        for (i, name) in Self.sourceNames.keys.sorted().enumerated() {
            if i > 0 { json.raw(",") }
            json.string(name)
            json.raw(":")
            json.string(Self.sourceNames[name])
        }
        json.raw(#"},"unreachableReasons":["#)
        for (i, prefix) in Self.unreachableReasons.enumerated() {
            if i > 0 { json.raw(",") }
            json.string(prefix)
        }
        json.raw("]")
        for (key, value) in [("stale", stale), ("unreachable", unreachableLine), ("failed", failedLine), ("waiting", waitingLine),
                             ("staleLine", staleLine), ("held", heldLine)] {
            json.raw(",")
            json.string(key)
            json.raw(":")
            json.string(value)
        }
        json.raw("}")
    }

    /// The strings the page's script needs, as a JSON object.
    func scriptStrings(_ json: inout JSONWriter) {
        let pairs: [(String, String)] = [
            ("incidence", incidence), ("phase", phase), ("dataDate", dataDate), ("noDevices", noDevices),
            ("noLamps", noLamps), ("online", online), ("offline", offline), ("noErrors", noErrors),
            ("stale", stale), ("connected", connected), ("disconnected", disconnected),
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

/// The header's badge for the data in force (``PageText/badge(_:)``).
public struct DataBadge: Sendable, Hashable {
    /// Its colour, as a CSS class of the badge.
    public enum Tone: String, Sendable, Hashable {
        /// Green: live data that is not stale.
        case ok
        /// Amber: live data that is stale, or bundled data standing in for the live source.
        case warn
        /// Neutral: data chosen to stay as it is (a snapshot, the history, a replay).
        case fixed
    }

    /// `Live · 2026-08-21`, `Ersatzdaten · 23.11.2020`, `Live · 2026-08-18 (stale)`.
    public var text: String
    public var tone: Tone
    /// What the kind means, on hover.
    public var title: String
}

/// A line under the header about the data (``PageText/notices(_:)``).
public struct DataNotice: Sendable, Hashable {
    /// Its element id: `data-error`, `data-stale` or `data-held`.
    public var id: String
    public var text: String
}
