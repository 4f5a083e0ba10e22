import AmpelMessages
import AmpelMQTT
@testable import AmpelDaemon
import AmpelDomain
import Foundation
import Testing

/// Alerts for the OwnTracks apps (`notify.owntracks`): which fixes come from an app, and what
/// the engine publishes for them, without I/O.
@Suite("OwnTracks notices")
struct OwnTracksNoticesTests {
    func phone(_ device: String = "alice/phone", _ place: (Double, Double) = (48.137, 11.575), tst: Int = 1_602_720_000) -> LocationFix {
        LocationFix(device: device, latitude: place.0, longitude: place.1, tst: tst, accuracy: 12.4, owntracks: true)
    }

    func engine(_ dataset: Dataset = Fixtures.october, owntracks: OwnTracksNotices? = OwnTracksNotices(),
                devices: [String: DaemonConfiguration.DeviceSettings] = [:]) -> SignalEngine {
        var engine = SignalEngine(settings: Fixtures.settings(devices: devices, owntracks: owntracks), dataset: dataset, stale: false)
        _ = engine.event(.start)
        return engine
    }

    func object(_ message: OutgoingMessage) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])
    }

    @Test("a fix comes from an OwnTracks app when its topic is exactly owntracks/<user>/<device> and the key those two levels", arguments: [
        ("owntracks/alice/phone", "alice/phone", true),
        ("owntracks/東京/phone", "東京/phone", true),
        ("owntracks/alice/phone/extra", "alice/phone/extra", false),  // `owntracks/#`: no user the app listens under
        ("owntracks/alice/phone", "phone", false),                    // a filter `owntracks/alice/+`
        ("ot/alice/phone", "alice/phone", false),                     // another prefix
        ("owntracks/alice", "alice", false),
        ("xowntracks/alice/phone", "alice/phone", false),
        ("owntracks/caf\u{E9}/phone", "cafe\u{301}/phone", false),       // equal as Strings, other bytes: other topics
    ])
    func appTopic(topic: String, key: String, expected: Bool) {
        #expect(OwnTracksNotices.isAppTopic(topic, key: key) == expected)
    }

    @Test("the user is the key up to its first `/` byte, also when a combining mark or variation selector follows the `/`")
    func userOfKey() {
        #expect(OwnTracksNotices.user(of: "alice/phone") == "alice")
        // "/\u{FE0F}" and "/\u{301}" are single Characters: a Character split found no `/`.
        #expect(OwnTracksNotices.user(of: "\u{F6}-x/\u{FE0F}-0") == "\u{F6}-x")
        #expect(OwnTracksNotices.user(of: "bob/\u{301}e") == "bob")
        #expect(OwnTracksNotices.user(of: "nouser") == "nouser")
    }

    @Test("a phone's alert goes to its user's apps as a transition, after the alert and before the state that witnesses both")
    func transitionAfterAlert() throws {
        var engine = engine()
        let actions = engine.event(.fix(phone(), place: Fixtures.muenchen, receivedAt: 0))
        let kinds = actions.steps.compactMap { if case .publish(_, let kind) = $0 { kind } else { nil } }
        // Its Home Assistant configs first (how many is the discovery's business).
        #expect(kinds.drop { $0 == .discovery } == [.ownTracksCard, .deviceAlert, .deviceTransition, .deviceState])
        if case .decide(let decision)? = actions.first(where: { if case .decide = $0 { true } else { false } }),
           case .device(_, let record) = decision.change, let announcement = decision.announcement {
            #expect(record.owntracks)
            #expect(announcement.messages.map(\.kind) == [.deviceAlert, .deviceTransition], "the transition is announced with the alert")
            #expect(announcement.witness.kind == .deviceState)
        } else {
            Issue.record("the alert is announced with its decision")
        }
        let transition = try #require(actions.on("owntracks/alice/ampel/event").first)
        #expect(transition.qos == .atLeastOnce && !transition.retain)
        let alert = try #require(actions.on("ampel/device/alice/phone/alert").first)
        #expect(transition.expiry == alert.expiry)
        let json = try object(transition)
        #expect(json["_type"] as? String == "transition")
        #expect(json["event"] as? String == "enter")
        #expect(json["desc"] as? String == "SK München – " + ((try actions.json("ampel/device/alice/phone/alert"))["title"] as? String ?? ""))
        #expect(json["lat"] as? Double == 48.137 && json["lon"] as? Double == 11.575)
        #expect(json["tst"] as? Int == 1_602_720_000, "the fix's time")
        #expect(json["wtst"] as? Int == 1_602_720_000, "2020-10-15 00:00 UTC, the data's day")
        // The fix's accuracy in whole metres (the schema wants an integer).
        #expect(json["acc"] as? Int == 12)
        let card = try #require(actions.on("owntracks/alice/ampel/info").first)
        #expect(card.retain && card.qos == .atLeastOnce)
        #expect(try object(card) as NSDictionary == ["_type": "card", "name": "Ampel"] as NSDictionary)
    }

    @Test("desc names the district and the alert's title in the device's language", arguments: [Language.de, .en])
    func language(_ language: Language) throws {
        var engine = engine(devices: ["alice/phone": .init(lang: language)])
        let actions = engine.event(.fix(phone(), place: Fixtures.muenchen, receivedAt: 0))
        let desc = try object(try #require(actions.on("owntracks/alice/ampel/event").first))["desc"] as? String
        let title = try Fixtures.ruleSet.signal(atDistrict: "09162", placeName: "München", dataset: Fixtures.october, region: .bavaria,
                                                language: language, stale: false).title
        #expect(desc == "SK München – " + title)
        #expect(title.hasPrefix(language == .de ? "Rot" : "Red"))
    }

    @Test("no transition and no card for a fix from no app, nor with notify.owntracks off")
    func notForOthers() {
        var plain = engine()
        let actions = plain.event(.fix(LocationFix(device: "alice/phone", latitude: 48.137, longitude: 11.575, tst: 5), place: Fixtures.muenchen,
                                       receivedAt: 0))
        #expect(actions.on("ampel/device/alice/phone/alert").count == 1)
        #expect(!actions.topics.contains { $0.hasPrefix("owntracks/") })
        var off = engine(owntracks: nil)
        let offActions = off.event(.fix(phone(), place: Fixtures.muenchen, receivedAt: 0))
        #expect(offActions.on("ampel/device/alice/phone/alert").count == 1)
        #expect(!offActions.topics.contains { $0.hasPrefix("owntracks/") })
    }

    @Test("only a phase change sends a transition; the device level is configurable")
    func onlyOnChange() {
        var engine = engine(owntracks: OwnTracksNotices(deviceLevel: "signal"))
        let first = engine.event(.fix(phone(), place: Fixtures.muenchen, receivedAt: 0))
        #expect(first.on("owntracks/alice/signal/event").count == 1)
        #expect(first.on("owntracks/alice/signal/info").count == 1)
        let same = engine.event(.fix(phone(tst: 1_602_720_100), place: Fixtures.muenchen, receivedAt: 0))
        #expect(!same.topics.contains { $0.hasPrefix("owntracks/") })
        let moved = engine.event(.fix(phone(tst: 1_602_720_200), place: Fixtures.altoetting, receivedAt: 0))
        #expect(moved.on("owntracks/alice/signal/event").count == 1)
    }

    @Test("one card per user and run: at the user's first fix, and again after every reconnect")
    func cards() {
        var engine = engine()
        #expect(engine.event(.fix(phone("alice/phone"), place: Fixtures.muenchen, receivedAt: 0)).on("owntracks/alice/ampel/info").count == 1)
        #expect(engine.event(.fix(phone("alice/tablet"), place: Fixtures.muenchen, receivedAt: 0)).on("owntracks/alice/ampel/info").isEmpty)
        #expect(engine.event(.fix(phone("bob/phone"), place: Fixtures.muenchen, receivedAt: 0)).on("owntracks/bob/ampel/info").count == 1)
        let reconnect = engine.event(.reconnected)
        #expect(reconnect.steps.filter { if case .publish(_, .ownTracksCard) = $0 { true } else { false } }.count == 2)
        #expect(reconnect.on("owntracks/alice/ampel/info").count == 1 && reconnect.on("owntracks/bob/ampel/info").count == 1)
        // A reconnect republishes but announces nothing.
        #expect(reconnect.on("owntracks/alice/ampel/event").isEmpty)
    }

    @Test("new data that changes a phone's phase sends the transition too, dated when the data took effect, with the card first")
    func newData() throws {
        // Known from the state file, not seen in this run yet: its card has not gone out.
        let record = DeviceRecord(lat: 48.137, lon: 11.575, tst: 1_600_000_000, lang: nil,
                                  district: Signal.DistrictRef(ags: "09162", name: "SK München", state: "Bayern", type: "SK"),
                                  phase: "red", dataDate: "2020-10-15", stale: false, owntracks: true)
        var engine = SignalEngine(settings: Fixtures.settings(owntracks: OwnTracksNotices()), dataset: Fixtures.october, stale: false,
                                  restored: PersistedState(devices: ["alice/phone": record]))
        #expect(!engine.followingReevaluation(engine.event(.start)).actions.topics.contains { $0.hasPrefix("owntracks/") })
        let actions = engine.followingReevaluation(engine.event(.data(Fixtures.november, stale: false))).actions
        let mine = actions.steps.filter {
            if case .publish(let message, _) = $0 { message.topic.contains("alice") } else { if case .persist(.device) = $0 { true } else { false } }
        }
        let kinds = mine.compactMap { if case .publish(_, let kind) = $0 { kind } else { nil } }
        #expect(kinds == [.ownTracksCard, .deviceAlert, .deviceTransition, .homeAssistantEvent, .deviceState])
        let json = try object(try #require(actions.on("owntracks/alice/ampel/event").first))
        #expect(json["tst"] as? Int == 1_604_534_400, "2020-11-05 00:00 UTC: later than the fix")
        #expect(json["wtst"] as? Int == 1_604_534_400)
    }
}
