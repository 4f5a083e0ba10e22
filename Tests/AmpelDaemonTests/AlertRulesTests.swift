@testable import AmpelDaemon
import AmpelDomain
import Foundation
import Testing

/// The rules that decide whether a device's move is worth an alert: `alerts.max_fix_age`,
/// `inputs.max_accuracy` and `alerts.min_dwell`, fed to the engine without I/O. On 2020-10-15
/// SK München (09162) was red and LK München (09184) yellow.
@Suite("Alerts only when they matter")
struct AlertRulesTests {
    static let receivedAt = 1_700_000_000

    struct Step {
        var place: Signal.DistrictRef?
        var tst: Int?
        var accuracy: Double? = nil
        var receivedAt = AlertRulesTests.receivedAt
    }

    /// - Parameter deviceState: `every_fix` by default: most of these read the phase each fix's state shows.
    func engine(maxFixAge: Duration? = nil, maxAccuracy: Double? = nil, dwell: Dwell = .none,
                deviceState: DaemonConfiguration.OutputSettings.DeviceStateMode = .everyFix) -> SignalEngine {
        var settings = Fixtures.settings(discovery: false)
        settings.maxFixAge = maxFixAge
        settings.maxAccuracy = maxAccuracy
        settings.minDwell = dwell
        settings.outputs.deviceState = deviceState
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        _ = engine.event(.start)
        return engine
    }

    func send(_ step: Step, to engine: inout SignalEngine, device: String = "alice/phone") -> [SignalEngine.Action] {
        let fix = LocationFix(device: device, latitude: 48.1, longitude: 11.6, tst: step.tst, accuracy: step.accuracy)
        return engine.event(.fix(fix, place: step.place, receivedAt: step.receivedAt))
    }

    /// The `from>to` of each device alert in `actions`.
    func alerts(_ actions: [SignalEngine.Action]) throws -> [String] {
        try actions.published.filter { $0.topic.hasSuffix("/alert") }.map { message in
            let json = try #require(JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
            return "\(json["from"] as? String ?? "null")>\(json["to"] as? String ?? "?")"
        }
    }

    func suppressions(_ actions: [SignalEngine.Action]) -> [AlertSuppression] {
        actions.compactMap { if case .alertSuppressed(let reason) = $0 { reason } else { nil } }
    }

    func statePhase(_ actions: [SignalEngine.Action]) throws -> String? {
        try actions.json("ampel/device/alice/phone/state")["phase"] as? String
    }

    // MARK: alerts.max_fix_age

    @Test("an old fix in another phase moves the position, not the phase, and alerts no one; the next fresh fix there alerts once")
    func oldFix() throws {
        var engine = engine(maxFixAge: .seconds(900))
        let now = Self.receivedAt
        // Fresh when it came: the first sighting is announced.
        #expect(try alerts(send(Step(place: Fixtures.muenchen, tst: now - 4000, receivedAt: now - 4000), to: &engine)) == ["null>red"])
        // The queue of a phone back online: a crossing an hour ago, then more of the same hour.
        let crossing = send(Step(place: Fixtures.landkreis, tst: now - 3600), to: &engine)
        #expect(try alerts(crossing).isEmpty)
        #expect(suppressions(crossing) == [.oldFix])
        #expect(try statePhase(crossing) == "red")
        #expect(engine.devices["alice/phone"]?.tst == now - 3600)
        let later = send(Step(place: Fixtures.landkreis, tst: now - 1000), to: &engine)
        #expect(try alerts(later).isEmpty)
        #expect(suppressions(later).isEmpty, "one crossing, counted once")
        // 15 minutes is still fresh; the alert is about where the person is now.
        let fresh = send(Step(place: Fixtures.landkreis, tst: now - 900), to: &engine)
        #expect(try alerts(fresh) == ["red>yellow"])
        #expect(try statePhase(fresh) == "yellow")
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: now), to: &engine)).isEmpty)
    }

    @Test("an old burst that crosses and comes back sends nothing, its first sighting included; a fix without tst counts as fresh; no limit keeps today's behaviour")
    func oldBurstAndLimits() throws {
        var limited = engine(maxFixAge: .seconds(900))
        var unlimited = engine()
        var sent: (limited: [String], unlimited: [String]) = ([], [])
        for (place, tst) in [(Fixtures.muenchen, 100), (Fixtures.landkreis, 200), (Fixtures.muenchen, 300), (Fixtures.landkreis, 400), (Fixtures.muenchen, 500)] {
            sent.limited += try alerts(send(Step(place: place, tst: tst), to: &limited))
            sent.unlimited += try alerts(send(Step(place: place, tst: tst), to: &unlimited))
        }
        #expect(sent.limited.isEmpty)
        #expect(sent.unlimited == ["null>red", "red>yellow", "yellow>red", "red>yellow", "yellow>red"])
        // No `tst`: the fix is as young as its arrival, and the device's first alert.
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: nil), to: &limited)) == ["null>yellow"])
    }

    /// The publishes of `actions` in order, by kind, with the persists: the journal's view.
    func sequence(_ actions: [SignalEngine.Action]) -> [String] {
        actions.steps.compactMap { action -> String? in
            switch action {
            case .persist: "persist"
            case .publish(_, let kind) where kind == .deviceAlert: "alert"
            case .publish(_, let kind) where kind == .deviceState: "state"
            default: nil
            }
        }
    }

    @Test("a first sighting by an old fix alerts no one (counted), its state goes out; the first fresh fix alerts as a first sighting, in the same phase too, with its state as witness")
    func oldFirstSighting() throws {
        // on_change: the fresh fix changes nothing a consumer sees, yet its alert needs its state after it.
        var engine = engine(maxFixAge: .seconds(900), deviceState: .onChange)
        let now = Self.receivedAt
        let queued = send(Step(place: Fixtures.muenchen, tst: now - 7200), to: &engine)
        #expect(try alerts(queued).isEmpty)
        #expect(suppressions(queued) == [.oldFix])
        #expect(sequence(queued) == ["persist", "state"])
        #expect(try statePhase(queued) == "red")
        #expect(engine.devices["alice/phone"]?.announced == false)
        // More of the queue, same phase: nothing more to count.
        let more = send(Step(place: Fixtures.muenchen, tst: now - 7000), to: &engine)
        #expect(try alerts(more).isEmpty)
        #expect(suppressions(more).isEmpty)
        let fresh = send(Step(place: Fixtures.muenchen, tst: now - 60), to: &engine)
        #expect(try alerts(fresh) == ["null>red"])
        #expect(suppressions(fresh).isEmpty)
        #expect(sequence(fresh) == ["persist", "alert", "state"])
        #expect(engine.devices["alice/phone"]?.announced == true)
        #expect(try alerts(send(Step(place: Fixtures.muenchen, tst: now), to: &engine)).isEmpty, "announced once")
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: now + 10, receivedAt: now + 10), to: &engine)) == ["red>yellow"])
    }

    @Test("a queue that crosses before anyone was told: its state follows the old fixes, each crossing counted; the fresh fix alerts where the person is, from null")
    func oldQueueAcrossPhases() throws {
        var engine = engine(maxFixAge: .seconds(900), dwell: .seconds(60))
        let now = Self.receivedAt
        var queue: [SignalEngine.Action] = []
        for (place, tst) in [(Fixtures.muenchen, now - 7200), (Fixtures.landkreis, now - 3600), (Fixtures.landkreis, now - 1800)] {
            let actions = send(Step(place: place, tst: tst), to: &engine)
            queue += actions
            if place == Fixtures.landkreis { #expect(try statePhase(actions) == "yellow", "no phase was announced, so none is kept") }
        }
        #expect(try alerts(queue).isEmpty)
        #expect(suppressions(queue) == [.oldFix, .oldFix], "the first sighting and the crossing")
        // A first sighting does not wait for the dwell.
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: now - 5), to: &engine)) == ["null>yellow"])
        #expect(try alerts(send(Step(place: Fixtures.muenchen, tst: now), to: &engine)).isEmpty, "now the dwell holds a move")
    }

    @Test("not announced survives a restart from the persisted state: the fresh fix after it alerts once, and a restart after that alerts no more")
    func oldFirstSightingAcrossRestart() throws {
        var engine = engine(maxFixAge: .seconds(900))
        let now = Self.receivedAt
        _ = send(Step(place: Fixtures.muenchen, tst: now - 7200), to: &engine)
        var restarted = SignalEngine(settings: engine.settings, dataset: Fixtures.october, stale: false, restored: engine.persisted)
        let start = restarted.followingReevaluation(restarted.event(.start)).actions
        #expect(try alerts(start).isEmpty)
        #expect(try alerts(send(Step(place: Fixtures.muenchen, tst: now), to: &restarted)) == ["null>red"])
        var again = SignalEngine(settings: engine.settings, dataset: Fixtures.october, stale: false, restored: restarted.persisted)
        #expect(try alerts(again.followingReevaluation(again.event(.start)).actions).isEmpty)
        #expect(try alerts(send(Step(place: Fixtures.muenchen, tst: now + 10, receivedAt: now + 10), to: &again)).isEmpty)
    }

    @Test("new data that changes the phase of a device seen only in old fixes alerts no one (counted); its fresh fix then alerts from null")
    func newDataBeforeFirstAlert() throws {
        var engine = engine(maxFixAge: .seconds(900))
        let now = Self.receivedAt
        _ = send(Step(place: Fixtures.muenchen, tst: now - 7200), to: &engine)
        let november = engine.followingReevaluation(engine.event(.data(Fixtures.november, stale: false))).actions
        #expect(november.on("ampel/device/alice/phone/alert").isEmpty, "the districts alert, the device does not")
        #expect(suppressions(november) == [.oldFix])
        #expect(try statePhase(november) == "darkred")
        #expect(try alerts(send(Step(place: Fixtures.muenchen, tst: now), to: &engine)) == ["null>darkred"])
    }

    // MARK: inputs.max_accuracy

    @Test("a coarse fix in another district is dropped as inaccurate; in the same district it refreshes position and time; a first sighting waits for a good one")
    func accuracy() throws {
        var engine = engine(maxAccuracy: 1000)
        #expect(send(Step(place: Fixtures.muenchen, tst: 100, accuracy: 5000), to: &engine) == [.dropped(.inaccurate)])
        #expect(engine.devices["alice/phone"] == nil)
        #expect(try alerts(send(Step(place: Fixtures.muenchen, tst: 110, accuracy: 1000), to: &engine)) == ["null>red"])
        #expect(send(Step(place: Fixtures.landkreis, tst: 120, accuracy: 1001), to: &engine) == [.dropped(.inaccurate)])
        #expect(engine.devices["alice/phone"]?.tst == 110)
        let same = send(Step(place: Fixtures.muenchen, tst: 130, accuracy: 3000), to: &engine)
        #expect(try alerts(same).isEmpty)
        #expect(engine.devices["alice/phone"]?.tst == 130)
        // No accuracy given: taken as good.
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: 140), to: &engine)) == ["red>yellow"])
        var unlimited = self.engine()
        _ = send(Step(place: Fixtures.muenchen, tst: 100), to: &unlimited)
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: 120, accuracy: 5000), to: &unlimited)) == ["red>yellow"])
    }

    // MARK: alerts.min_dwell

    @Test("a dwell of 60 s: a 20 s excursion sends nothing (counted), a stay sends one alert at the fix that completes the minute")
    func dwellSeconds() throws {
        var engine = engine(dwell: .seconds(60))
        #expect(try alerts(send(Step(place: Fixtures.muenchen, tst: 0), to: &engine)) == ["null>red"], "a first sighting has nothing to wait for")
        var excursion: [SignalEngine.Action] = []
        for tst in [100, 110, 120] {
            let actions = send(Step(place: Fixtures.landkreis, tst: tst), to: &engine)
            #expect(try statePhase(actions) == "red", "the state keeps the phase last announced")
            excursion += actions
        }
        excursion += send(Step(place: Fixtures.muenchen, tst: 130), to: &engine)
        #expect(try alerts(excursion).isEmpty)
        #expect(suppressions(excursion) == [.dwell])
        var stay: [String] = []
        var confirming: [SignalEngine.Action] = []
        for tst in [200, 230, 259, 260, 300] {
            let actions = send(Step(place: Fixtures.landkreis, tst: tst), to: &engine)
            stay += try alerts(actions)
            if tst == 260 { confirming = actions }
        }
        #expect(stay == ["red>yellow"])
        #expect(try alerts(confirming) == ["red>yellow"])
        // The journal's order: the decision, its alert, then the state that witnesses it.
        let kinds = confirming.steps.compactMap { action -> String? in
            switch action {
            case .persist: "persist"
            case .publish(_, let kind) where kind == .deviceAlert: "alert"
            case .publish(_, let kind) where kind == .deviceState: "state"
            default: nil
            }
        }
        #expect(kinds == ["persist", "alert", "state"])
        #expect(engine.devices["alice/phone"]?.district?.ags == "09184")
    }

    @Test("a dwell of 3 fixes: two fixes away send nothing, the third sends the alert")
    func dwellFixes() throws {
        var engine = engine(dwell: .fixes(3))
        _ = send(Step(place: Fixtures.muenchen, tst: 0), to: &engine)
        var sent: [String] = []
        for (place, tst) in [(Fixtures.landkreis, 1), (Fixtures.landkreis, 2), (Fixtures.muenchen, 3),
                             (Fixtures.landkreis, 4), (Fixtures.landkreis, 5), (Fixtures.landkreis, 6), (Fixtures.landkreis, 7)] {
            sent += try alerts(send(Step(place: place, tst: tst), to: &engine))
            if tst == 5 { #expect(sent.isEmpty) }
        }
        #expect(sent == ["red>yellow"])
    }

    @Test("a move on to a third phase ends the excursion unannounced and starts the dwell again")
    func dwellPhases() throws {
        var engine = engine(dwell: .seconds(60))
        _ = send(Step(place: Fixtures.muenchen, tst: 0), to: &engine)
        _ = send(Step(place: Fixtures.landkreis, tst: 10), to: &engine)
        // Abroad is another phase (outside): the yellow minute ends unannounced.
        let abroad = send(Step(place: nil, tst: 50), to: &engine)
        #expect(suppressions(abroad) == [.dwell])
        #expect(try alerts(send(Step(place: nil, tst: 100), to: &engine)).isEmpty, "60 s counted from 50, not from 10")
        #expect(try alerts(send(Step(place: nil, tst: 110), to: &engine)) == ["red>outside"])
    }

    @Test("a dwell under way does not survive a restart: the alert comes a dwell later, once")
    func dwellAcrossRestart() throws {
        var engine = engine(dwell: .seconds(60))
        _ = send(Step(place: Fixtures.muenchen, tst: 0), to: &engine)
        _ = send(Step(place: Fixtures.landkreis, tst: 100), to: &engine)
        var restarted = SignalEngine(settings: engine.settings, dataset: Fixtures.october, stale: false, restored: engine.persisted)
        _ = restarted.event(.start)
        var sent: [Int: [String]] = [:]
        for tst in [170, 200, 230, 260] { sent[tst] = try alerts(send(Step(place: Fixtures.landkreis, tst: tst), to: &restarted)) }
        #expect(sent == [170: [], 200: [], 230: ["red>yellow"], 260: []])
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: 170), to: &engine)) == ["red>yellow"], "without the restart, at 170")
    }

    @Test("old fixes tell the dwell how long the device has been there, but only a fresh fix confirms it")
    func oldFixesAndDwell() throws {
        var engine = engine(maxFixAge: .seconds(900), dwell: .seconds(60))
        let now = Self.receivedAt
        _ = send(Step(place: Fixtures.muenchen, tst: now - 7200, receivedAt: now - 7200), to: &engine)
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: now - 3600), to: &engine)).isEmpty)
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: now - 1800), to: &engine)).isEmpty)
        #expect(try alerts(send(Step(place: Fixtures.landkreis, tst: now - 10), to: &engine)) == ["red>yellow"])
    }
}
