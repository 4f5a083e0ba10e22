import AmpelCore
import AmpelDomain
import Foundation
import Testing

/// `Signal.json` and `alertJSON` write by hand what `JSONEncoder` (``AmpelJSON``) wrote before:
/// every byte must stay the same, or retained states would flip between two spellings.
@Suite struct JSONWriterTests {
    /// The reference shapes, encoded by `JSONEncoder` with ``AmpelJSON``'s settings and `null`
    /// written for every absent value.
    struct DistrictShape: Encodable {
        let ref: Signal.DistrictRef
        enum Keys: String, CodingKey { case ags, name, state, type }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(ref.ags, forKey: .ags)
            try c.encode(ref.name, forKey: .name)
            try c.encode(ref.state, forKey: .state)
            try c.encode(ref.type, forKey: .type)
        }
    }

    struct SignalShape: Encodable {
        let signal: Signal
        enum Keys: String, CodingKey {
            case district, incidence, phase, color, dataDate, ruleSet, lang, title, rules, always, stale, measuredPhase, since, trend, complete, indicators, reason
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(signal.district.map(DistrictShape.init), forKey: .district)
            try c.encode(signal.incidence, forKey: .incidence)
            try c.encode(signal.phase, forKey: .phase)
            try c.encode(signal.color, forKey: .color)
            try c.encode(signal.dataDate, forKey: .dataDate)
            try c.encode(signal.ruleSet, forKey: .ruleSet)
            try c.encode(signal.lang, forKey: .lang)
            try c.encode(signal.title, forKey: .title)
            try c.encode(signal.rules, forKey: .rules)
            try c.encode(signal.always, forKey: .always)
            try c.encode(signal.stale, forKey: .stale)
            try c.encode(signal.measuredPhase, forKey: .measuredPhase)
            try c.encode(signal.since, forKey: .since)
            try c.encode(signal.trend.map(TrendShape.init), forKey: .trend)
            try c.encode(signal.complete, forKey: .complete)
            try c.encode(signal.indicators, forKey: .indicators)
            try c.encode(signal.reason, forKey: .reason)
        }
    }

    struct TrendShape: Encodable {
        let trend: Trend
        enum Keys: String, CodingKey { case change7, direction, series }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(trend.change7, forKey: .change7)
            try c.encode(trend.direction.rawValue, forKey: .direction)
            try c.encode(trend.series, forKey: .series)
        }
    }

    struct DeviceState: Encodable {
        let signal: Signal
        let device: String, lat: Double, lon: Double, tst: Int
        enum Keys: String, CodingKey { case device, lat, lon, tst }
        func encode(to encoder: any Encoder) throws {
            try SignalShape(signal: signal).encode(to: encoder)
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(device, forKey: .device)
            try c.encode(lat, forKey: .lat)
            try c.encode(lon, forKey: .lon)
            try c.encode(tst, forKey: .tst)
        }
    }

    struct Alert: Encodable {
        let device: String?, from: String?, to: String, district: Signal.DistrictRef?, incidence: Double?
        let dataDate: String, lang: String, title: String, rules: [String], always: [String]
        let indicators: [IndicatorReading], reason: String?
        enum Keys: String, CodingKey { case device, from, to, district, incidence, dataDate, lang, title, rules, always, indicators, reason }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(device, forKey: .device)
            try c.encode(from, forKey: .from)
            try c.encode(to, forKey: .to)
            try c.encode(district.map(DistrictShape.init), forKey: .district)
            try c.encode(incidence, forKey: .incidence)
            try c.encode(dataDate, forKey: .dataDate)
            try c.encode(lang, forKey: .lang)
            try c.encode(title, forKey: .title)
            try c.encode(rules, forKey: .rules)
            try c.encode(always, forKey: .always)
            try c.encode(indicators, forKey: .indicators)
            try c.encode(reason, forKey: .reason)
        }
    }

    /// The webhook body: the alert plus `message` and `priority`.
    struct PushAlert: Encodable {
        let alert: Alert, message: String, priority: Int
        enum Keys: String, CodingKey { case message, priority }
        func encode(to encoder: any Encoder) throws {
            try alert.encode(to: encoder)
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(message, forKey: .message)
            try c.encode(priority, forKey: .priority)
        }
    }

    static let awkwardNames = [
        "SK München", "LK Neustadt a.d.Aisch-Bad Windsheim", #"Quote " and \ backslash"#, "slash/and\ttab\nnewline",
        "control \u{1}\u{8}\u{c}\u{1f}\u{7f} end", "emoji 😷 and \u{2028}", "",
    ]

    static let incidences: [Double] = [
        0, 0.1, 1e-7, .leastNonzeroMagnitude, 34.999, 35, 35.00000000000001, 50, 50.0001, 100, 100.00001, 123.456789012345,
        1651.234, 12_345_678_901_234_568, 1e21,
    ]

    func signals() throws -> [Signal] {
        let day = try #require(Day(iso: "2020-11-05"))
        var signals: [Signal] = []
        // Courses with and without a trend, in force differing from measured or not.
        let rising = (0..<14).map { 40 + Double($0) * 3.7 }
        let courses: [DistrictCourse?] = [
            nil,
            DistrictCourse(trend: Trend(series: rising), inForce: PhaseInForce(phase: .darkred, measured: .red, since: day)),
            DistrictCourse(trend: Trend(series: rising.reversed()), inForce: nil),
            DistrictCourse(trend: Trend(series: Array(repeating: 0.1, count: 14)), inForce: PhaseInForce(phase: .red, measured: .red, since: day)),
        ]
        for id in ["bavaria", "bavaria-initial", "notbremse-2021"] {
            let ruleSet = try RuleSetCatalog.bundled(id)
            for language in [Language.de, .en] {
                for (index, name) in Self.awkwardNames.enumerated() {
                    for incidence in Self.incidences {
                        let district = District(ags: "09\(162 + index)", name: name, shortName: name, kind: index % 2 == 0 ? .city : .county,
                                                state: "Bayern", population: nil)
                        signals.append(try ruleSet.signal(for: DistrictIncidence(district: district, incidence: incidence, stateIncidence: nil),
                                                          dataDate: day, language: language, stale: incidence > 100,
                                                          course: courses[(index + signals.count) % courses.count]))
                    }
                    let ref = Signal.DistrictRef(ags: "08111", name: name, state: "Baden-Württemberg", type: index % 2 == 0 ? "SK" : nil)
                    signals.append(ruleSet.outsideSignal(district: ref, dataDate: day, language: language, stale: index % 3 == 0))
                }
                signals.append(ruleSet.outsideSignal(district: nil, dataDate: day, language: language))
            }
        }
        // The sets of state indicators: values, missing values and awkward numbers.
        let munich = District(ags: "09162", name: "SK München", shortName: "München", kind: .city, state: "Bayern", population: nil)
        for id in ["krankenhausampel-2021", "hospitalisierung-2021"] {
            let ruleSet = try RuleSetCatalog.bundled(id)
            // hospitalisierung-2021 reads one indicator: without its value there is no signal.
            for (index, value) in ((ruleSet.indicators.count > 1 ? [nil] : []) + Self.incidences.map { Optional($0) }).enumerated() {
                let indicators = ruleSet.indicators.enumerated().map { number, declaration in
                    IndicatorValue(key: declaration.key, region: "09", value: number == index % 2 ? value : 653, date: day)
                }
                for language in [Language.de, .en] {
                    signals.append(try ruleSet.signal(for: DistrictIncidence(district: munich, incidence: nil, stateIncidence: nil, indicators: indicators),
                                                      dataDate: day, language: language, course: nil))
                }
            }
        }
        return signals
    }

    @Test func signalBytesEqualJSONEncoder() throws {
        let signals = try signals()
        #expect(signals.count > 400)
        for signal in signals {
            #expect(signal.json() == Array(try AmpelJSON.data(SignalShape(signal: signal))))
        }
    }

    @Test func deviceStateBytesEqualJSONEncoder() throws {
        var random = SystemRandomNumberGenerator()
        let keys = ["alice/phone", #"q"uo\te/ü"#, "car-7", "tab\there"]
        for (index, signal) in try signals().enumerated() {
            let lat = index % 5 == 0 ? 48.0 : Double.random(in: -90...90, using: &random)
            let lon = index % 7 == 0 ? -0.000001 : Double.random(in: -180...180, using: &random)
            let tst = index % 3 == 0 ? 0 : Int.random(in: 0..<2_000_000_000, using: &random)
            let key = keys[index % keys.count]
            let expected = Array(try AmpelJSON.data(DeviceState(signal: signal, device: key, lat: lat, lon: lon, tst: tst)))
            let written = signal.json(device: .init(device: key, lat: lat, lon: lon, tst: tst))
            #expect(written == expected, "\(String(decoding: written, as: UTF8.self))")
        }
    }

    @Test func alertBytesEqualJSONEncoder() throws {
        for (index, signal) in try signals().enumerated() {
            let device: String? = index % 2 == 0 ? nil : "alice/phone"
            let from: String? = index % 3 == 0 ? nil : "green"
            let reference = Alert(device: device, from: from, to: signal.phase, district: signal.district, incidence: signal.incidence,
                                  dataDate: signal.dataDate, lang: signal.lang, title: signal.title, rules: signal.rules, always: signal.always,
                                  indicators: signal.indicators, reason: signal.reason)
            #expect(signal.alertJSON(device: device, from: from) == Array(try AmpelJSON.data(reference)))
            let push = Signal.PushFields(message: "\(device ?? "") – \(signal.district?.name ?? "") – \(signal.title)", priority: index % 11)
            let written = signal.alertJSON(device: device, from: from, push: push)
            #expect(written == Array(try AmpelJSON.data(PushAlert(alert: reference, message: push.message, priority: push.priority))),
                    "\(String(decoding: written, as: UTF8.self))")
        }
    }

    @Test func stringsEscapeLikeJSONEncoder() throws {
        // Every byte value below 0x80 and some multi-byte characters, one string each.
        var texts = (0..<128).map { String(UnicodeScalar(UInt8($0))) }
        texts += ["ä", "€", "😷", "a\u{0}b", String(repeating: "\"", count: 40)]
        for text in texts {
            var json = JSONWriter()
            json.string(text)
            #expect(json.bytes == Array(try AmpelJSON.data([text]).dropFirst().dropLast()), "\(Array(text.utf8))")
        }
    }
}
