import AmpelCore
import AmpelLamp
import Testing

/// Each payload reading takes exactly what it needs and answers nil for everything else.
@Suite struct LampPayloadTests {
    private func plain(_ text: String) -> LampSignal? { LampPayload.plainSignal(Array(text.utf8)) }
    private func object(_ text: String) -> (LampSignal, Bool)? {
        LampPayload.signalObject(Array(text.utf8)).map { ($0.signal, $0.stale) }
    }

    @Test func plainPhaseIDs() {
        #expect(plain("green") == .phase(.green))
        #expect(plain("yellow") == .phase(.yellow))
        #expect(plain("red") == .phase(.red))
        #expect(plain("darkred") == .phase(.darkred))
        #expect(plain("outside") == .outside)
        #expect(plain(" red\r\n") == .phase(.red))
        for bad in ["", "Red", "RED", "purple", "re d", "redd", "\"red\"", "{\"phase\":\"red\"}", "dark red", "red\0"] {
            #expect(plain(bad) == nil, "\(bad)")
        }
    }

    @Test func signalObjectTakesTopLevelPhaseAndStale() {
        let daemon = ##"{"district":{"ags":"09162","name":"München","state":"Bayern"},"incidence":61.2,"phase":"red","color":"#FF0000","dataDate":"2020-10-25","ruleSet":"bavaria-2020-10","lang":"de","title":"Rot","rules":["Maske"],"always":[],"device":"a/b","lat":48.1,"lon":11.5,"tst":1603600000,"stale":false}"##
        #expect(object(daemon)! == (.phase(.red), false))
        #expect(object(#"{"phase":"darkred","stale":true}"#)! == (.phase(.darkred), true))
        #expect(object(#"{"phase":"outside"}"#)! == (.outside, false))
        #expect(object(#"{"stale":false,"phase":"green"}"#)! == (.phase(.green), false))
    }

    @Test func signalObjectRefusesWhatItCannotTrust() {
        for bad in [
            #"{"phase":"purple"}"#, #"{"phase":null}"#, #"{"phase":2}"#, #"{"phase":["red"]}"#,
            #"{"stale":false}"#, #"{"phase":"red","stale":"no"}"#, #"{"phase":"red","stale":0}"#,
            #"{"phase":"red","phase":"green"}"#, #"{"phase":"red","stale":false,"stale":true}"#,
            #"{"district":{"phase":"red"}}"#, #"{"title":"\"phase\":\"red\""}"#, #"{"phase":"red""#,
            #"{"phase":" red"}"#, "red", "",
        ] {
            #expect(object(bad) == nil, "\(bad)")
        }
    }

    @Test func staleFlagOfDistrictState() {
        #expect(LampPayload.staleFlag(Array(#"{"phase":"red","stale":true}"#.utf8)) == true)
        #expect(LampPayload.staleFlag(Array(#"{"stale":false}"#.utf8)) == false)
        #expect(LampPayload.staleFlag(Array(#"{"x":{"stale":true}}"#.utf8)) == nil)
        #expect(LampPayload.staleFlag(Array(#"{"stale":"true"}"#.utf8)) == nil)
    }

    @Test func bridgeState() {
        #expect(LampPayload.bridgeOnline(Array(#"{"state":"online"}"#.utf8)) == true)
        #expect(LampPayload.bridgeOnline(Array(#"{"state":"offline"}"#.utf8)) == false)
        #expect(LampPayload.bridgeOnline(Array("offline".utf8)) == false)
        #expect(LampPayload.bridgeOnline(Array("online".utf8)) == true)
        #expect(LampPayload.bridgeOnline(Array(#"{"state":"sleepy"}"#.utf8)) == nil)
        #expect(LampPayload.bridgeOnline(Array(#"{"x":{"state":"offline"}}"#.utf8)) == nil)
        #expect(LampPayload.bridgeOnline(Array(#"{"state":"offline""#.utf8)) == nil)
    }
}

/// Topics follow the daemon's layout and refuse names that cannot be subscribed to exactly.
@Suite struct LampTopicsTests {
    private func text(_ topic: [UInt8]) -> String { String(decoding: topic, as: UTF8.self) }

    @Test func districtTopics() throws {
        let topics = try LampTopics(follow: .district, id: "09162")
        #expect(topics.subscriptions.map(text) == ["ampel/district/09162/phase", "ampel/district/09162/state", "ampel/bridge/state"])
        #expect(topics.role(of: Array("ampel/district/09162/phase".utf8)) == .signal)
        #expect(topics.role(of: Array("ampel/district/09162/state".utf8)) == .districtState)
        #expect(topics.role(of: Array("ampel/bridge/state".utf8)) == .bridge)
        #expect(topics.role(of: Array("ampel/district/09163/phase".utf8)) == nil)
    }

    @Test func deviceTopicsWithCustomBaseAndTwoLevelKey() throws {
        let topics = try LampTopics(follow: .device, id: "alice/phone", base: "city/ampel")
        #expect(topics.subscriptions.map(text) == ["city/ampel/device/alice/phone/state", "city/ampel/bridge/state"])
        #expect(topics.role(of: Array("city/ampel/device/alice/phone/state".utf8)) == .signal)
    }

    @Test func invalidIDs() {
        #expect(throws: LampTopicError.emptyID) { try LampTopics(follow: .district, id: "") }
        #expect(throws: LampTopicError.emptyBase) { try LampTopics(follow: .district, id: "09162", base: "") }
        for bad in ["09/162", "+", "#", "a\0b"] {
            #expect(throws: LampTopicError.invalidTopic) { try LampTopics(follow: .district, id: bad) }
        }
        for bad in ["a//b", "a/", "/a", "a/+", "#"] {
            #expect(throws: LampTopicError.invalidTopic) { try LampTopics(follow: .device, id: bad) }
        }
    }
}
