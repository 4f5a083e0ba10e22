import AmpelTestSupport
import Foundation
import Testing

/// `ampel run` against a real mosquitto, started over a state directory that holds a bad state
/// file or a bad data cache: the daemon must come online anyway, with the bad file moved aside
/// (content intact) and the fact reported in `bridge/info`.
@Suite("ampel run recovers from a bad state file or cache (built binary, real mosquitto)")
struct RunRecoveryTests {
    static let truncated = #"{"version":1,"districts":{"09162":"red"},"devices":{"alice/phone":{"lat":48.137,"lon":11.5"#

    @Test("garbage or a truncated state.json: moved aside with its content, the daemon comes online and says so",
          arguments: [Data("\u{0}\u{7F}not a state file at all \u{1B}[".utf8), Data(truncated.utf8)])
    func badStateFile(content: Data) async throws {
        var options = Scene.Options()
        options.date = nil
        try await Scene.run(options) { scene in
            let dir = scene.state
            try content.write(to: dir.appendingPathComponent("state.json"))
            // A temporary file of a write that a crash cut short, and one that is not of that pattern.
            try Data("half".utf8).write(to: dir.appendingPathComponent(".state.json.4194999.17.tmp"))
            try Data("mine".utf8).write(to: dir.appendingPathComponent("notes.tmp"))

            // Online at all: the start awaits it.
            let daemon = try await scene.start()
            let info = try await scene.retainedInfo()
            let recovered = try #require(info["stateRecovered"] as? [String: Any], "bridge/info: \(info)")
            let movedTo = try #require(recovered["movedTo"] as? String)
            #expect(movedTo.hasPrefix(dir.path + "/state.json.corrupt-"))
            #expect(movedTo.wholeMatch(of: /.*\/state\.json\.corrupt-\d{8}T\d{6}Z/) != nil, "\(movedTo)")
            #expect((recovered["reason"] as? String)?.contains("not a valid state file") == true, "\(recovered)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: movedTo)) == content, "moved aside with its content intact")
            #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent(".state.json.4194999.17.tmp").path))
            #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("notes.tmp").path))

            try await scene.stop()
            let log = daemon.stderr
            #expect(log.contains("error") && log.contains("moved aside") && log.contains(movedTo), "\(log)")
            // The stop writes a fresh, valid state file in its place, unless its write misses the
            // stop's limit (a busy disk under CI's parallel suites): the journal then holds the
            // state, and the log says so.
            let statePath = dir.appendingPathComponent("state.json")
            if let fresh = FileManager.default.contents(atPath: statePath.path) {
                #expect((try? JSONSerialization.jsonObject(with: fresh)) != nil)
            } else {
                #expect(log.contains("the snapshot did not finish within the stop's limit"), "no state.json and no word why: \(log)")
            }
            // Either way the next start finds a good state: nothing to recover.
            let again = try await scene.start()
            try await scene.stop()
            #expect(!again.stderr.contains("moved aside") && !again.stderr.contains("state file is missing"), "\(again.stderr)")
        }
    }

    @Test("a corrupt data cache: moved aside, the daemon starts from the bundled snapshot, the next source")
    func badCache() async throws {
        // Nothing listens on the service's port: only the cache or the bundled data can start it.
        let port = try MosquittoBroker.freeLoopbackPort()
        var options = Scene.Options()
        (options.source, options.date, options.arguments) = ("arcgis", nil, ["--url", "http://127.0.0.1:\(port)/query"])
        try await Scene.run(options) { scene in
            let dir = scene.state
            let garbage = Data(#"{"format":"ampel-incidence-cache","version":1,"districts":["#.utf8)
            try garbage.write(to: dir.appendingPathComponent("incidence.json"))
            let daemon = try await scene.start()
            let info = try await scene.retainedInfo()
            #expect(info["dataDate"] as? String == "2020-11-23", "the latest bundled snapshot: \(info)")
            let aside = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("incidence.json.corrupt-") }
            #expect(aside.count == 1, "\(aside)")
            if let name = aside.first {
                #expect(try Data(contentsOf: dir.appendingPathComponent(name)) == garbage)
            }
            try await scene.stop()
            #expect(daemon.stderr.contains("moved aside"), "\(daemon.stderr)")
        }
    }
}

/// After a lost state the daemon rebuilds the device phases from its own retained device states
/// before it alerts anyone: a device that reports again in its phase gets no alert.
@Suite("ampel run rebuilds device phases from the broker after a lost state (built binary, real mosquitto)")
struct RunRebuildTests {
    /// SK München, LK München, Altötting; Stuttgart outside Bavaria, Vienna outside Germany
    /// (no district): `ags` nil.
    static let places: [String: (lat: Double, lon: Double, ags: String?)] = [
        "muenchen": (48.1374, 11.5755, "09162"), "landkreis": (48.2489, 11.6528, "09184"), "altoetting": (48.2264, 12.6770, "09171"),
        "stuttgart": (48.7758, 9.1829, nil), "wien": (48.2082, 16.3738, nil),
    ]
    static let day = "2020-10-15"

    /// Each place's phase on ``day``, read from the recording: `outside` for a place without a Bavarian district.
    static func phase(_ place: String) throws -> String {
        guard let ags = try #require(places[place]).ags else { return "outside" }
        return expectedPhase(try #require(try rawBavarianIncidences(day: day)[ags], "\(ags) on \(day)"))
    }

    /// Every device's first alert, from `null` into the phase of its place.
    static func firstAlerts() throws -> [String: [String]] {
        var expected: [String: [String]] = [:]
        for device in devices { expected[device.key] = ["null>\(try phase(device.place))"] }
        return expected
    }

    /// Device, input, where it is: a plain key with and without a language, an OwnTracks key of two levels.
    static let devices: [(key: String, place: String, lang: String?)] = [
        ("alice", "muenchen", nil), ("bob", "altoetting", nil), ("carol", "landkreis", "de"), ("dave/phone", "stuttgart", nil),
        ("erin", "wien", nil), ("frank", "muenchen", "de"),
    ]

    /// A fix of `key` at `place`: an OwnTracks key has two levels.
    static func report(_ scene: Scene, _ key: String, at place: String, tst: Int, lang: String?) async throws {
        let spot = try #require(places[place])
        try await scene.fix(key, at: (spot.lat, spot.lon), tst: tst, lang: lang, input: key.contains("/") ? .owntracks : .plain)
    }

    /// The first run of each test: every device reports at `tst` 100 from its place, and the
    /// daemon stops cleanly.
    func firstRun(_ scene: Scene) async throws {
        try await scene.start()
        for device in Self.devices {
            try await Self.report(scene, device.key, at: device.place, tst: 100, lang: device.lang)
        }
        try await scene.collector.awaitStates(Self.devices.map(\.key), tst: 100)
        try await scene.stop()
    }

    @Test("garbage state.json and no journal: devices reporting again in their phase get no alert, one that moves gets exactly one, from its old phase")
    func rebuildFromRetainedStates() async throws {
        try await Scene.run { scene in
            let (dir, collector) = (scene.state, scene.collector)
            let keys = Self.devices.map(\.key)

            try await firstRun(scene)
            var expected = try Self.firstAlerts()
            #expect(collector.alerts() == expected, "first run")

            // Nothing on disk remembers the devices any more: the state file is garbage, the journal gone.
            let garbage = Data("\u{0}garbage, not a state file".utf8)
            try garbage.write(to: dir.appendingPathComponent("state.json"))
            let segments = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("journal-") && $0.hasSuffix(".log") }
            #expect(!segments.isEmpty)
            for name in segments { try FileManager.default.removeItem(at: dir.appendingPathComponent(name)) }

            let daemon = try await scene.start()
            // Everyone again where they were (a later fix), but bob has moved from Altötting (green) to München (red).
            for device in Self.devices {
                try await Self.report(scene, device.key, at: device.key == "bob" ? "muenchen" : device.place, tst: 200, lang: device.lang)
            }
            try await collector.awaitStates(keys, tst: 200)
            try await scene.stop()
            expected["bob", default: []].append("\(try Self.phase("altoetting"))>\(try Self.phase("muenchen"))")
            #expect(collector.alerts() == expected, "after the restart only bob's move is announced\n\(daemon.stderr)")

            // The goodbye's bridge/info (retained) says what was rebuilt.
            let json = try await scene.retainedInfo()
            let recovered = try #require(json["stateRecovered"] as? [String: Any], "\(json)")
            #expect((recovered["movedTo"] as? String)?.hasPrefix(dir.path + "/state.json.corrupt-") == true, "\(recovered)")
            let rebuilt = try #require(recovered["rebuilt"] as? [String: Any], "\(recovered)")
            #expect(rebuilt["devices"] as? Int == Self.devices.count, "\(rebuilt)")
            #expect(rebuilt["known"] as? Int == 0, "\(rebuilt)")
            #expect(rebuilt["districts"] as? Int == (try rawBavarianIncidences(day: Self.day).count), "\(rebuilt)")
            #expect(rebuilt["skipped"] as? Int == 0, "\(rebuilt)")
            #expect(rebuilt["expectedDevices"] as? Int == Self.devices.count, "\(rebuilt)")
            #expect(rebuilt["complete"] as? Bool == true, "\(rebuilt)")
            #expect(daemon.stderr.contains("rebuilt the device phases from the broker's retained states"), "\(daemon.stderr)")
            // The rebuild's snapshot and the stop's: a valid state file with every device again.
            let state = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("state.json"))) as? [String: Any])
            #expect(Set(((state["devices"] as? [String: Any]) ?? [:]).keys) == Set(keys))
        }
    }

    @Test("state.json missing under a journal that continues from it: the journal's decisions win, the broker fills the rest, no alert repeats")
    func rebuildUnderJournal() async throws {
        try await Scene.run { scene in
            let (dir, collector) = (scene.state, scene.collector)
            let keys = Self.devices.map(\.key)

            try await firstRun(scene)
            // bob moves in a second run, which dies before it writes a snapshot: the decision is
            // only in the journal (and in the broker's retained state).
            try await scene.start()
            try await Self.report(scene, "bob", at: "muenchen", tst: 200, lang: nil)
            try await collector.awaitStates(["bob"], tst: 200)
            try await scene.kill()
            // The snapshot goes; the journal segments after it stay.
            try FileManager.default.removeItem(at: dir.appendingPathComponent("state.json"))
            let segments = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("journal-") }.sorted()
            #expect(segments.first.map { $0 != "journal-00000001.log" } == true, "\(segments)")

            let daemon = try await scene.start()
            for device in Self.devices {
                try await Self.report(scene, device.key, at: device.key == "bob" ? "muenchen" : device.place, tst: 300, lang: device.lang)
            }
            try await collector.awaitStates(keys, tst: 300)
            try await scene.stop()
            var expected = try Self.firstAlerts()
            expected["bob", default: []].append("\(try Self.phase("altoetting"))>\(try Self.phase("muenchen"))")
            #expect(collector.alerts() == expected, "\(daemon.stderr)")

            let json = try await scene.retainedInfo()
            let recovered = try #require(json["stateRecovered"] as? [String: Any], "\(json)")
            #expect(recovered["movedTo"] is NSNull, "\(recovered)")
            #expect((recovered["reason"] as? String)?.contains("missing") == true, "\(recovered)")
            let rebuilt = try #require(recovered["rebuilt"] as? [String: Any], "\(recovered)")
            #expect(rebuilt["known"] as? Int == 1, "bob came from the journal: \(rebuilt)")
            #expect(rebuilt["devices"] as? Int == Self.devices.count - 1, "\(rebuilt)")
            #expect(rebuilt["complete"] as? Bool == true, "\(rebuilt)")
        }
    }
}
