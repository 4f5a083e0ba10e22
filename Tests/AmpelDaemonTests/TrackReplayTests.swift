import AmpelData
@testable import AmpelDaemon
import AmpelDomain
import Foundation
import Testing

/// Recorded tracks (Fixtures/tracks) replayed fix by fix through the engine with the bundled
/// geometry, on their own timestamps: the alerts with `alerts.min_dwell` are exactly the ones a
/// plain reading of the track's phases gives (a run of fixes in one phase that lasts the dwell),
/// and never more than without it.
@Suite("Recorded tracks through the engine")
struct TrackReplayTests {
    struct Fix {
        var lat: Double
        var lon: Double
        var tst: Int
    }

    static let locator = try! GeoLocator.bundled()

    static func fixture(_ name: String) throws -> String {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures/tracks"))
        return try String(contentsOf: url, encoding: .utf8)
    }

    /// barefoot's JSON: `{"point":"POINT(lon lat)","time":"2014-09-10 06:54:07+0200"}`.
    static func barefoot() throws -> [Fix] {
        let data = Data(try fixture("barefoot_x0001-001.json").utf8)
        let points = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        return try points.map { point in
            let wkt = try #require(point["point"] as? String)
            let numbers = wkt.dropFirst("POINT(".count).dropLast().split(separator: " ").compactMap { Double($0) }
            // RFC 3339 wants a `T` and a colon in the offset.
            var time = try #require(point["time"] as? String).replacingOccurrences(of: " ", with: "T")
            time.insert(":", at: time.index(time.endIndex, offsetBy: -2))
            let tst = try #require(InternetTime.parse(time), "\(time)")
            return Fix(lat: numbers[1], lon: numbers[0], tst: Int(tst))
        }
    }

    /// GPX `<trkpt lat lon><time>`.
    static func gpx(_ name: String) throws -> [Fix] {
        let text = try fixture(name)
        let pattern = try NSRegularExpression(pattern: #"<trkpt lat="([-0-9.]+)" lon="([-0-9.]+)">.*?<time>([^<]+)</time>"#,
                                              options: [.dotMatchesLineSeparators])
        let range = NSRange(text.startIndex..., in: text)
        return try pattern.matches(in: text, range: range).map { match in
            func group(_ index: Int) -> String { String(text[Range(match.range(at: index), in: text)!]) }
            let tst = try #require(InternetTime.parse(group(3)), "\(group(3))")
            return Fix(lat: try #require(Double(group(1))), lon: try #require(Double(group(2))), tst: Int(tst))
        }
    }

    /// The `to` phase of every device alert when `fixes` are fed to an engine with `dwell`.
    static func replay(_ fixes: [Fix], dataset: Dataset, dwell: Dwell) throws -> [String] {
        try replay(fixes, dataset: dataset) { $0.minDwell = dwell }
    }

    /// The same with any settings; `arrival` gives each fix's receipt time and accuracy (by
    /// default it arrives at its own time and says nothing of its accuracy).
    static func replay(_ fixes: [Fix], dataset: Dataset, settings adjust: (inout SignalEngine.Settings) -> Void,
                       arrival: (Int, Fix) -> (receivedAt: Int, accuracy: Double?) = { _, fix in (fix.tst, nil) }) throws -> [String] {
        var settings = Fixtures.settings(discovery: false)
        adjust(&settings)
        var engine = SignalEngine(settings: settings, dataset: dataset, stale: false)
        _ = engine.event(.start)
        var alerts: [String] = []
        for (index, fix) in fixes.enumerated() {
            let place = locator.place(latitude: fix.lat, longitude: fix.lon)
            let (receivedAt, accuracy) = arrival(index, fix)
            let location = LocationFix(device: "track", latitude: fix.lat, longitude: fix.lon, tst: fix.tst, accuracy: accuracy)
            for message in engine.event(.fix(location, place: place, receivedAt: receivedAt)).published where message.topic.hasSuffix("/alert") {
                let json = try #require(try JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
                alerts.append(try #require(json["to"] as? String))
            }
        }
        return alerts
    }

    /// The phases a dwell lets through, read off the track: split it into runs of fixes in one
    /// phase; a run announces its phase when it differs from the last one announced and its
    /// first and last fixes lie `seconds` apart (or it has `count` fixes). The first run is a
    /// first sighting and announces at once. Fixes older than the one before are left out.
    static func expected(_ fixes: [Fix], dataset: Dataset, dwell: Dwell) throws -> (alerts: [String], runs: Int) {
        var runs: [(phase: String, first: Int, last: Int, count: Int)] = []
        // The planned route's synthetic times jump back where its segments were joined; a fix
        // older than the one before is out of order, and the engine drops it.
        for fix in fixes where fix.tst >= runs.last?.last ?? .min {
            let place = locator.place(latitude: fix.lat, longitude: fix.lon)
            let signal = try Fixtures.ruleSet.signal(atDistrict: place?.ags, placeName: place?.name, dataset: dataset,
                                                     region: .bavaria, language: .en, stale: false)
            if runs.last?.phase == signal.phase {
                runs[runs.count - 1].last = fix.tst
                runs[runs.count - 1].count += 1
            } else {
                runs.append((signal.phase, fix.tst, fix.tst, 1))
            }
        }
        var alerts: [String] = []
        for run in runs where alerts.last != run.phase {
            let lasts: Bool
            switch dwell {
            case .seconds(let seconds): lasts = run.last - run.first >= seconds
            case .fixes(let count): lasts = run.count >= count
            }
            if alerts.isEmpty || lasts { alerts.append(run.phase) }
        }
        return (alerts, runs.count)
    }

    static let tracks: [(name: String, load: @Sendable () throws -> [Fix])] = [
        ("barefoot München", { try barefoot() }),
        ("A5 Augsburg-München", { try gpx("rallygpxmerger_A5_Augsburg-Muenchen_PLANNED.gpx") }),
    ]

    /// The data a track is replayed in: the October snapshot and a second publication in which
    /// the track crosses a phase border too, else the check compares one alert with one alert.
    /// The November snapshot keeps both tracks in one phase; the first day of each month of
    /// the bundled daily history is tried in turn.
    static func datasets(crossedBy fixes: [Fix]) throws -> [Dataset] {
        var month = ""
        for day in BundledData.shared.historyDays where day.iso.prefix(7) != month {
            month = String(day.iso.prefix(7))
            let dataset = try BundledData.shared.history(on: day)
            if try expected(fixes, dataset: dataset, dwell: .none).runs > 1 { return [Fixtures.october, dataset] }
        }
        return [Fixtures.october]
    }

    @Test("alerts along a recorded track with and without a dwell match the track's phase runs", arguments: [0, 1])
    func replay(track: Int) throws {
        let (name, load) = Self.tracks[track]
        let fixes = try load()
        #expect(fixes.count > 1000, "\(name): \(fixes.count) fixes read")
        let datasets = try Self.datasets(crossedBy: fixes)
        try #require(datasets.count == 2, "\(name): no publication of the bundled history in which it crosses a phase border")
        for dataset in datasets {
            var counts: [String] = []
            let immediate = try Self.replay(fixes, dataset: dataset, dwell: .none)
            let (plain, runs) = try Self.expected(fixes, dataset: dataset, dwell: .none)
            // A track that stays in one phase would compare one alert with one alert.
            try #require(runs > 1 && plain.count > 1, "\(name) crosses no phase border in the data of \(dataset.date.iso)")
            #expect(immediate == plain, "\(name), \(dataset.date.iso), no dwell")
            counts.append("no dwell \(immediate.count)")
            for dwell in [Dwell.seconds(60), .fixes(3)] {
                let alerts = try Self.replay(fixes, dataset: dataset, dwell: dwell)
                #expect(alerts == (try Self.expected(fixes, dataset: dataset, dwell: dwell).alerts), "\(name), \(dataset.date.iso), \(dwell)")
                #expect(alerts.count <= immediate.count)
                counts.append("\(dwell) \(alerts.count)")
            }
            print("\(name), data of \(dataset.date.iso): \(fixes.count) fixes, \(runs) phase runs; alerts: \(counts.joined(separator: ", "))")
        }
    }

    @Test("a whole track delivered an hour late alerts no one; the next fresh fix alerts where it ended, as a first sighting; coarse fixes never move it", arguments: [0, 1])
    func lateQueueAndCoarseFixes(track: Int) throws {
        let (name, load) = Self.tracks[track]
        let fixes = try load()
        let dataset = Fixtures.october
        let (plain, runs) = try Self.expected(fixes, dataset: dataset, dwell: .none)
        try #require(runs > 1 && plain.count > 1, "\(name) crosses no phase border in the data of \(dataset.date.iso)")
        let arrived = try #require(fixes.map(\.tst).max()) + 3600
        // A phone's queue: every fix arrives an hour after the trip ended, then one fresh fix
        // from where the trip ended.
        var late = fixes
        late.append(Fix(lat: fixes[fixes.count - 1].lat, lon: fixes[fixes.count - 1].lon, tst: arrived))
        let alerts = try Self.replay(late, dataset: dataset, settings: { $0.maxFixAge = .seconds(900) }) { index, fix in
            (index == late.count - 1 ? fix.tst : arrived, nil)
        }
        let end = Self.locator.place(latitude: late[late.count - 1].lat, longitude: late[late.count - 1].lon)
        let ended = try Fixtures.ruleSet.signal(atDistrict: end?.ags, placeName: end?.name, dataset: dataset,
                                                region: .bavaria, language: .en, stale: false).phase
        // Nothing about where the trip went an hour ago: one alert, about where the person is.
        #expect(alerts == [ended], "\(name): \(plain.count) alerts on time")
        // Every fix after the first 5 km coarse: the device stays where its first fix put it.
        let coarse = try Self.replay(fixes, dataset: dataset, settings: { $0.maxAccuracy = 1000 }) { index, fix in
            (fix.tst, index == 0 ? 10 : 5000)
        }
        #expect(coarse == [plain[0]], "\(name): \(coarse)")
        print("\(name): on time \(plain.count) alerts; delivered an hour late \(alerts.count); coarse \(coarse.count)")
    }
}
