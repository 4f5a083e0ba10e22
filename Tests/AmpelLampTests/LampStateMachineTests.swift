import AmpelCore
import AmpelLamp
import Testing

/// Feeds events and checks patterns and frames; no clock, no I/O.
@Suite struct LampStateMachineTests {
    static let district = try! LampTopics(follow: .district, id: "09162")
    static let device = try! LampTopics(follow: .device, id: "alice/phone")

    private func message(_ topic: String, _ payload: String) -> LampEvent {
        .message(topic: Array(topic.utf8), payload: Array(payload.utf8))
    }
    private func phase(_ payload: String) -> LampEvent { message("ampel/district/09162/phase", payload) }
    private func deviceState(_ payload: String) -> LampEvent { message("ampel/device/alice/phone/state", payload) }
    private func bridge(_ state: String) -> LampEvent { message("ampel/bridge/state", #"{"state":"\#(state)"}"#) }

    /// A district lamp that has finished its lamp test at t = 2000 ms.
    private func runningDistrictLamp() -> LampStateMachine {
        var lamp = LampStateMachine(topics: Self.district)
        _ = lamp.event(.powerOn(at: 0))
        _ = lamp.event(.tick(at: 2000))
        return lamp
    }

    @Test func powerOnRunsTheLampTestThenWaits() {
        var lamp = LampStateMachine(topics: Self.district)
        #expect(lamp.event(.powerOn(at: 10_000)) == .show(.lampTest))
        let frames = stride(from: UInt64(10_000), to: 11_600, by: 400).map { lamp.frame(at: $0 + 100).lit }
        #expect(frames == [.red, .yellow, .green, .blue])
        #expect(lamp.event(.tick(at: 11_599)) == .none)
        #expect(lamp.pattern == .lampTest)
        #expect(lamp.event(.tick(at: 11_600)) == .show(.noSignal(.waiting)))
        #expect(lamp.patternStartedAt == 11_600)
    }

    @Test func signalReceivedDuringTheTestShowsAfterIt() {
        var lamp = LampStateMachine(topics: Self.district)
        _ = lamp.event(.powerOn(at: 0))
        #expect(lamp.event(phase("yellow")) == .none)
        #expect(lamp.event(.tick(at: 1600)) == .show(.phase(.yellow)))
    }

    @Test func phasesAreSteadyAndDarkRedBlinksAt1Hz() {
        var lamp = runningDistrictLamp()
        #expect(lamp.event(phase("green")) == .show(.phase(.green)))
        #expect(lamp.frame(at: 2000).lit == .green)
        #expect(lamp.frame(at: 99_999).lit == .green)
        #expect(lamp.event(phase("yellow")) == .show(.phase(.yellow)))
        #expect(lamp.event(phase("red")) == .show(.phase(.red)))
        #expect(lamp.event(phase("red")) == .none)
        #expect(lamp.frame(at: 2700).lit == .red)
        _ = lamp.event(.tick(at: 5000))
        #expect(lamp.event(phase("darkred")) == .show(.phase(.darkred)))
        #expect(lamp.patternStartedAt == 5000)
        let lit = [5000, 5499, 5500, 5999, 6000, 6499, 6500].map { lamp.frame(at: UInt64($0)).lit }
        #expect(lit == [.red, .red, [], [], .red, .red, []])
    }

    @Test func outsideIsSteadyBlue() {
        var lamp = runningDistrictLamp()
        #expect(lamp.event(phase("outside")) == .show(.outside))
        #expect(lamp.frame(at: 2000).lit == .blue)
        #expect(lamp.frame(at: 3000).lit == .blue)
    }

    @Test func noSignalBlinksBlueSlowlyAndNeverATrafficColour() {
        let lamp = runningDistrictLamp()
        #expect(lamp.pattern == .noSignal(.waiting))
        for t in stride(from: UInt64(2000), to: 10_000, by: 50) {
            let lit = lamp.frame(at: t).lit
            #expect(lit.isDisjoint(with: [.red, .yellow, .green]))
            #expect(lit == ((t - 2000) % 2000 < 1000 ? .blue : []))
        }
    }

    @Test func garbageAndUnknownIDsNeverChangeThePhase() {
        var lamp = runningDistrictLamp()
        _ = lamp.event(phase("red"))
        for junk in ["", "purple", "RED", "{\"phase\":\"green\"}", "green!", "\u{0}", "darkred darkred"] {
            #expect(lamp.event(phase(junk)) == .none)
            #expect(lamp.pattern == .phase(.red))
        }
        #expect(lamp.ignoredMessages == 7)
        #expect(lamp.event(message("ampel/district/09163/phase", "green")) == .none)
        #expect(lamp.event(message("ampel/bridge/state", "{\"state\":")) == .none)
        #expect(lamp.pattern == .phase(.red))
    }

    @Test func bridgeOfflineHidesThePhaseUntilOnline() {
        var lamp = runningDistrictLamp()
        _ = lamp.event(phase("green"))
        #expect(lamp.event(bridge("offline")) == .show(.noSignal(.offline)))
        // A phase change while offline is remembered, not shown.
        #expect(lamp.event(phase("red")) == .none)
        #expect(lamp.frame(at: 2100).lit == .blue)
        #expect(lamp.event(bridge("online")) == .show(.phase(.red)))
    }

    @Test func ownLinkDownIsOffline() {
        var lamp = runningDistrictLamp()
        _ = lamp.event(phase("yellow"))
        #expect(lamp.event(.link(up: false)) == .show(.noSignal(.offline)))
        #expect(lamp.event(.link(up: true)) == .show(.phase(.yellow)))
    }

    @Test func offlineBeforeAnySignalIsOfflineNotWaiting() {
        var lamp = runningDistrictLamp()
        #expect(lamp.event(bridge("offline")) == .show(.noSignal(.offline)))
        #expect(lamp.event(bridge("online")) == .show(.noSignal(.waiting)))
    }

    @Test func staleDistrictDataIsNoSignal() {
        var lamp = runningDistrictLamp()
        _ = lamp.event(phase("red"))
        #expect(lamp.event(message("ampel/district/09162/state", #"{"phase":"red","stale":true}"#)) == .show(.noSignal(.stale)))
        #expect(lamp.event(message("ampel/district/09162/state", #"{"phase":"red","stale":false}"#)) == .show(.phase(.red)))
        #expect(lamp.event(.dataStale(true)) == .show(.noSignal(.stale)))
        #expect(lamp.event(.dataStale(false)) == .show(.phase(.red)))
    }

    @Test func deviceLampReadsPhaseAndStaleFromTheSignalObject() {
        var lamp = LampStateMachine(topics: Self.device)
        _ = lamp.event(.powerOn(at: 0))
        _ = lamp.event(.tick(at: 1600))
        #expect(lamp.event(deviceState(#"{"district":{"ags":"09162","state":"Bayern"},"phase":"darkred","stale":false}"#)) == .show(.phase(.darkred)))
        #expect(lamp.event(deviceState(#"{"phase":"darkred","stale":true}"#)) == .show(.noSignal(.stale)))
        #expect(lamp.event(deviceState(#"{"phase":"green"}"#)) == .show(.phase(.green)))
        #expect(lamp.event(deviceState(#"{"phase":"outside","stale":false}"#)) == .show(.outside))
        // Garbage, unknown ids, a nested phase: nothing changes, stale included.
        for junk in [#"{"phase":"purple"}"#, #"{"x":{"phase":"red"}}"#, #"{"phase":"red","stale":true"#, "red"] {
            #expect(lamp.event(deviceState(junk)) == .none)
        }
        #expect(lamp.pattern == .outside)
        // A district lamp's plain phase topic means nothing to a device lamp.
        #expect(lamp.event(phase("red")) == .none)
    }

    @Test func powerOnForgetsEverything() {
        var lamp = runningDistrictLamp()
        _ = lamp.event(phase("red"))
        _ = lamp.event(bridge("offline"))
        #expect(lamp.event(.powerOn(at: 50_000)) == .show(.lampTest))
        #expect(lamp.signal == nil)
        #expect(lamp.event(.tick(at: 51_600)) == .show(.noSignal(.waiting)))
    }

    @Test func clockGoingBackwardsDoesNotBreakFrames() {
        var lamp = runningDistrictLamp()
        _ = lamp.event(.tick(at: 9000))
        _ = lamp.event(phase("darkred"))
        _ = lamp.event(.tick(at: 100))
        #expect(lamp.frame(at: 100).lit == .red)
        #expect(lamp.patternStartedAt == 9000)
    }

    @Test func jsonLines() {
        #expect(LampPattern.phase(.red).jsonLine == #"{"pattern":"red","reason":null,"leds":["red"],"blink":false,"periodMs":0}"#)
        #expect(LampPattern.phase(.darkred).jsonLine == #"{"pattern":"darkred","reason":null,"leds":["red"],"blink":true,"periodMs":1000}"#)
        #expect(LampPattern.outside.jsonLine == #"{"pattern":"outside","reason":null,"leds":["blue"],"blink":false,"periodMs":0}"#)
        #expect(LampPattern.noSignal(.stale).jsonLine == #"{"pattern":"nosignal","reason":"stale","leds":["blue"],"blink":true,"periodMs":2000}"#)
        #expect(LampPattern.lampTest.jsonLine == #"{"pattern":"test","reason":null,"leds":["red","yellow","green","blue"],"blink":true,"periodMs":1600}"#)
    }

    @Test func frameColours() {
        #expect(LampFrame(lit: .red).color() == RGB(red: 0xFF, green: 0, blue: 0))
        #expect(LampFrame(lit: .blue).color() == LampPalette.standard.blue)
        #expect(LampFrame(lit: []).color() == .off)
    }
}
