import AmpelMQTT
@testable import AmpelDaemon
import Testing

@Suite("Input parsers")
struct InputParserTests {
    let parser = InputParser(maxPayload: 4096)

    func parse(_ kind: InputKind, _ key: String, _ text: String) -> ParseOutcome {
        parser.parse(kind, topicKey: key, payload: Array(text.utf8))
    }

    func parse(_ kind: InputKind, _ text: String) -> ParseOutcome {
        parse(kind, "alice/phone", text)
    }

    @Test("every real OwnTracks sample is accepted, skipped by type, or rejected as the schema says")
    func ownTracksSamples() throws {
        var outcomes: [String: ParseOutcome] = [:]
        for (name, text) in OwnTracksSamples.all {
            outcomes[name] = parse(.owntracks, text)
        }
        #expect(outcomes.count == 15)
        // The three the schema rejects.
        #expect(outcomes["location-lat-missing"] == .dropped(.missingCoordinates, detail: "no latitude or longitude"))
        #expect(outcomes["transition-illegal-lat"] == .skipped("transition"))
        #expect(outcomes["lwt-notst"] == .skipped("lwt"))
        // Locations are accepted with their coordinates, time and accuracy.
        #expect(outcomes["l"] == .fix(LocationFix(device: "alice/phone", latitude: 52.195913, longitude: 7.688245, tst: 1_699_882_482, accuracy: 35)))
        #expect(outcomes["location-short"] == .fix(LocationFix(device: "alice/phone", latitude: 44.221389, longitude: 6.64635, tst: 1_692_430_980)))
        for name in ["l2", "location-5s", "location-sk"] {
            guard case .fix = outcomes[name] else {
                Issue.record("\(name) should be a fix, got \(String(describing: outcomes[name]))")
                continue
            }
        }
        // Everything else is skipped by its type, without a drop.
        #expect(outcomes["lwt"] == .skipped("lwt"))
        #expect(outcomes["lwt-extra"] == .skipped("lwt"))
        #expect(outcomes["transition"] == .skipped("transition"))
        #expect(outcomes["e"] == .skipped("encrypted"))
        #expect(outcomes["cmd-reportLocation"] == .skipped("cmd"))
        #expect(outcomes["status"] == .skipped("status"))
        #expect(outcomes["array"] == .skipped("array"))
    }

    @Test("OwnTracks: unknown types are skipped as other; waypoint and card by name")
    func ownTracksTypes() {
        #expect(parse(.owntracks, #"{"_type":"waypoint","desc":"x"}"#) == .skipped("waypoint"))
        #expect(parse(.owntracks, #"{"_type":"card","name":"A"}"#) == .skipped("card"))
        #expect(parse(.owntracks, #"{"_type":"teleport"}"#) == .skipped("other"))
        #expect(parse(.owntracks, #"{"lat":1,"lon":2}"#) == .skipped("untyped"))
    }

    @Test("OwnTracks: a location with a string latitude or out-of-range values is dropped")
    func ownTracksBadLocations() {
        #expect(parse(.owntracks, #"{"_type":"location","lat":"48.1","lon":11.5,"tst":1}"#) == .dropped(.invalidCoordinates, detail: "a coordinate is not a number"))
        #expect(parse(.owntracks, #"{"_type":"location","lat":91,"lon":11.5,"tst":1}"#) == .dropped(.invalidCoordinates, detail: "coordinates out of range"))
        #expect(parse(.owntracks, #"{"_type":"location","lat":48,"lon":-180.5,"tst":1}"#) == .dropped(.invalidCoordinates, detail: "coordinates out of range"))
        #expect(parse(.owntracks, #"{"_type":"location","lat":48,"lon":11,"tst":-5}"#) == .dropped(.invalidTimestamp, detail: "tst out of range"))
        #expect(parse(.owntracks, #"{"_type":"location","lat":48,"lon":11,"tst":"x"}"#) == .dropped(.invalidTimestamp, detail: "tst is not a number"))
        #expect(parse(.owntracks, #"{"_type":"location","lat":null,"lon":11}"#) == .dropped(.missingCoordinates, detail: "no latitude or longitude"))
    }

    @Test("plain: lat/lon and latitude/longitude, optional tst and lang")
    func plain() {
        #expect(parse(.plain, "car", #"{"lat":48.137,"lon":11.575}"#) == .fix(LocationFix(device: "car", latitude: 48.137, longitude: 11.575, tst: nil)))
        #expect(parse(.plain, "car", #"{"latitude":48.137,"longitude":11.575,"tst":1604570000,"lang":"de","gps_accuracy":5}"#)
            == .fix(LocationFix(device: "car", latitude: 48.137, longitude: 11.575, tst: 1_604_570_000, lang: "de")))
        #expect(parse(.plain, "car", #"{"latitude":48.137}"#) == .dropped(.missingCoordinates, detail: "no latitude or longitude"))
        #expect(parse(.plain, "car", #"{"lat":true,"lon":1}"#) == .dropped(.invalidCoordinates, detail: "a coordinate is not a number"))
    }

    @Test("Traccar: position and device.uniqueId; the key is sanitized; fixTime as ISO text or milliseconds")
    func traccar() {
        let iso = #"{"position":{"latitude":48.137,"longitude":11.575,"fixTime":"2020-11-05T10:00:00.000+0000"},"device":{"uniqueId":"8654 32#1","name":"Van"}}"#
        #expect(parse(.traccar, "", iso) == .fix(LocationFix(device: "8654_32_1", latitude: 48.137, longitude: 11.575, tst: 1_604_570_400)))
        let millis = #"{"position":{"latitude":48.1,"longitude":11.5,"fixTime":1604570400000},"device":{"uniqueId":"van-7"}}"#
        #expect(parse(.traccar, "", millis) == .fix(LocationFix(device: "van-7", latitude: 48.1, longitude: 11.5, tst: 1_604_570_400)))
        #expect(parse(.traccar, "", #"{"position":{"latitude":48.1,"longitude":11.5}}"#) == .dropped(.unsafeDeviceKey, detail: "no device.uniqueId"))
        #expect(parse(.traccar, "", #"{"position":{"latitude":48.1,"longitude":11.5},"device":{"uniqueId":"///"}}"#) == .dropped(.unsafeDeviceKey, detail: "device.uniqueId gives no usable key"))
        #expect(parse(.traccar, "", #"{"position":{"latitude":48.1,"longitude":11.5,"fixTime":"yesterday"},"device":{"uniqueId":"a"}}"#) == .dropped(.invalidTimestamp, detail: "position.fixTime is no date"))
    }

    @Test("Traccar positions marked valid: false are skipped; accuracy, OwnTracks and plain acc are read, a bad one ignored")
    func validityAndAccuracy() {
        let invalid = #"{"position":{"latitude":0,"longitude":0,"valid":false,"fixTime":1604570400000},"device":{"uniqueId":"van-7"}}"#
        #expect(parse(.traccar, "", invalid) == .skipped("invalid"))
        let valid = #"{"position":{"latitude":48.1,"longitude":11.5,"valid":true,"accuracy":12.5,"fixTime":1604570400000},"device":{"uniqueId":"van-7"}}"#
        #expect(parse(.traccar, "", valid) == .fix(LocationFix(device: "van-7", latitude: 48.1, longitude: 11.5, tst: 1_604_570_400, accuracy: 12.5)))
        #expect(parse(.owntracks, #"{"_type":"location","lat":48.1,"lon":11.5,"tst":1,"acc":1500}"#)
            == .fix(LocationFix(device: "alice/phone", latitude: 48.1, longitude: 11.5, tst: 1, accuracy: 1500)))
        #expect(parse(.plain, "car", #"{"lat":48.1,"lon":11.5,"acc":30}"#) == .fix(LocationFix(device: "car", latitude: 48.1, longitude: 11.5, tst: nil, accuracy: 30)))
        for acc in [#""far""#, "-5", "null"] {
            #expect(parse(.plain, "car", #"{"lat":48.1,"lon":11.5,"acc":\#(acc)}"#) == .fix(LocationFix(device: "car", latitude: 48.1, longitude: 11.5, tst: nil)), "\(acc)")
        }
    }

    @Test("not JSON, not an object, and oversized payloads are dropped with their reason")
    func badPayloads() {
        #expect(parse(.plain, "car", "lat=48,lon=11") == .dropped(.notJSON, detail: "not a JSON object"))
        #expect(parse(.plain, "car", "[1,2]") == .dropped(.notJSON, detail: "not a JSON object"))
        #expect(parse(.owntracks, "{\"_type\":\"location\",") == .dropped(.notJSON, detail: "not a JSON object"))
        #expect(parse(.owntracks, "[1,") == .dropped(.notJSON, detail: "not valid JSON"))
        let big = #"{"lat":48,"lon":11,"pad":""# + String(repeating: "x", count: 5000) + #""}"#
        #expect(parse(.plain, "car", big) == .dropped(.oversized, detail: "\(big.utf8.count) bytes, limit 4096"))
    }

    @Test("device keys that are not safe topic levels are dropped")
    func unsafeKeys() {
        let ok = #"{"lat":48,"lon":11}"#
        for key in ["", "a//b", "a/+", "#", "$SYS", "with space", "tab\tkey", String(repeating: "k", count: 200),
                    "/lead", "trail/", "/", "del\u{7F}", "jörg/"] {
            #expect(parse(.plain, key, ok) == .dropped(.unsafeDeviceKey, detail: "device key is not a safe topic level"), "\(key)")
        }
        #expect(parse(.plain, "nbsp\u{00A0}key", ok) == .dropped(.unsafeDeviceKey, detail: "device key holds the invisible or bidirectional character U+00A0"))
        #expect(parse(.plain, "ideographic\u{3000}space", ok) == .dropped(.unsafeDeviceKey, detail: "device key holds the invisible or bidirectional character U+3000"))
        #expect(parse(.plain, "jörg", ok) == .fix(LocationFix(device: "jörg", latitude: 48, longitude: 11, tst: nil)))
        #expect(parse(.plain, "alice/phone-2_x.y", ok) == .fix(LocationFix(device: "alice/phone-2_x.y", latitude: 48, longitude: 11, tst: nil)))
    }

    /// Characters that hide in a key or turn the text around it: each class the issue names.
    static let hostileScalars: [(String, [UInt32])] = [
        ("bidirectional embeddings and overrides U+202A-U+202E", Array(0x202A...0x202E)),
        ("bidirectional isolates U+2066-U+2069", Array(0x2066...0x2069)),
        ("zero-width and direction marks U+200B-U+200F", Array(0x200B...0x200F)),
        ("line and paragraph separators U+2028, U+2029", [0x2028, 0x2029]),
        ("byte order mark / zero-width no-break space U+FEFF", [0xFEFF]),
        ("soft hyphen U+00AD", [0x00AD]),
        ("other format characters (Cf): word joiner, Arabic letter mark, Mongolian vowel separator, invisible times, tags",
         [0x2060, 0x061C, 0x180E, 0x2062, 0xE0001, 0xE0041, 0xFFF9]),
        ("C1 controls", [0x0080, 0x0085, 0x009F]),
    ]

    @Test("device keys with invisible or bidirectional characters are refused as unsafe-device-key", arguments: hostileScalars)
    func hostileKeys(_ name: String, _ scalars: [UInt32]) throws {
        let ok = #"{"lat":48,"lon":11}"#
        for value in scalars {
            let scalar = try #require(Unicode.Scalar(value))
            let hex = String(value, radix: 16, uppercase: true)
            let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            for key in ["alice\(scalar)/phone", "\(scalar)alice", "alice/phone\(scalar)", "jörg\(scalar)"] {
                #expect(parse(.plain, key, ok) == .dropped(.unsafeDeviceKey, detail: "device key holds the invisible or bidirectional character \(code)"),
                        "\(name): \(code) in \(key.unicodeScalars.map { String($0.value, radix: 16) })")
                #expect(parse(.owntracks, key, #"{"_type":"location","lat":48,"lon":11}"#).isDropped(.unsafeDeviceKey))
                #expect(!DeviceKey.isSafe(key))
            }
        }
    }

    @Test("visible non-ASCII keys stay accepted; ASCII keys never reach the Unicode check")
    func visibleKeys() {
        let ok = #"{"lat":48,"lon":11}"#
        for key in ["jörg", "東京/phone", "zoë/🚗", "سيارة/هاتف", "Ελλάδα", "mañana-1"] {
            #expect(parse(.plain, key, ok) == .fix(LocationFix(device: key, latitude: 48, longitude: 11, tst: nil)), "\(key)")
        }
        #expect(DeviceKey.firstUnsafeScalar("alice/phone") == nil)
    }

    @Test("lang: a known language is kept; unknown, not a string, cut or invalid UTF-8 is ignored and marked")
    func langField() {
        func lang(_ json: String) -> ParseOutcome { parse(.plain, "car", #"{"lat":48,"lon":11,"lang":"# + json + "}") }
        func fix(_ lang: String?, ignored: Bool = false) -> ParseOutcome {
            .fix(LocationFix(device: "car", latitude: 48, longitude: 11, tst: nil, lang: lang, langIgnored: ignored))
        }
        for known in ["de", "en", "DE", "en-GB", "de_DE.UTF-8", "de-AT", "en@euro"] {
            #expect(lang("\"\(known)\"") == fix(known), "\(known)")
        }
        for unknown in ["fr", "", "C", "klingon", "-de", "xx-de", #"d\u00e9"#, #"de\u202e"#] {
            #expect(lang("\"\(unknown)\"") == fix(nil, ignored: true), "\(unknown)")
        }
        for wrongType in ["5", "true", #"["de"]"#, #"{"de":1}"#] {
            #expect(lang(wrongType) == fix(nil, ignored: true), "\(wrongType)")
        }
        #expect(lang("null") == fix(nil), "null is absent, not ignored")
        #expect(parse(.plain, "car", #"{"lat":48,"lon":11}"#) == fix(nil))
        // Longer than the scanner keeps, the text is cut, here inside a two-byte sequence:
        // the bytes kept are no valid UTF-8 and no whole value.
        #expect(lang("\"d" + String(repeating: "ä", count: 16) + "\"") == fix(nil, ignored: true))
        #expect(lang("\"de-" + String(repeating: "x", count: 40) + "\"") == fix(nil, ignored: true))
        // Raw bytes that are not UTF-8 make the whole payload no JSON (RFC 8259 requires UTF-8):
        // dropped as not-json, like a lone escaped surrogate.
        var bytes = Array(#"{"lat":48,"lon":11,"lang":""#.utf8)
        bytes += [0xC3, 0x28]
        bytes += Array(#""}"#.utf8)
        #expect(parser.parse(.plain, topicKey: "car", payload: bytes) == .dropped(.notJSON, detail: "not a JSON object"))
        #expect(lang(#""\ud800""#) == .dropped(.notJSON, detail: "not a JSON object"))
    }

    @Test("topic filters capture the wildcard levels as the device key")
    func topicFilters() throws {
        let owntracks = try MQTTTopicFilter("owntracks/+/+")
        #expect(owntracks.capture("owntracks/alice/phone") == "alice/phone")
        #expect(owntracks.capture("owntracks/alice") == nil)
        #expect(owntracks.capture("owntracks/alice/phone/event") == nil)
        #expect(owntracks.capture("other/alice/phone") == nil)
        let plain = try MQTTTopicFilter("ampel/location/+")
        #expect(plain.capture("ampel/location/car") == "car")
        let fixed = try MQTTTopicFilter("traccar/positions")
        #expect(fixed.capture("traccar/positions") == "")
        let multi = try MQTTTopicFilter("gps/#")
        #expect(multi.capture("gps/a/b") == "a/b")
        #expect(try MQTTTopicFilter("+/x").capture("$SYS/x") == nil)
        #expect(try MQTTTopicFilter("#").capture("$SYS/x") == nil)
        #expect(multi.capture("gps") == "")
        #expect(multi.capture("gps/") == "")
        #expect(multi.capture("gp") == nil)
        #expect(try MQTTTopicFilter("a/+/b/+").capture("a/x/b/y") == "x/y")
        #expect(try MQTTTopicFilter("a/+/b/+").capture("a/x/c/y") == nil)
        #expect(owntracks.capture("owntracks//phone") == "/phone")
        #expect(owntracks.capture("owntracks/jörg/ü") == "jörg/ü")
        #expect(plain.capture("ampel/locationx/car") == nil)
        #expect(plain.capture("ampel/location") == nil)
        // Shared subscriptions (scale-out, deploy/README.md): subscribed as written, matched
        // against the topics the broker delivers.
        let shared = try MQTTTopicFilter("$share/ampel/owntracks/+/+")
        #expect(shared.filter == "$share/ampel/owntracks/+/+")
        #expect(shared.capture("owntracks/alice/phone") == "alice/phone")
        #expect((try? MQTTTopicFilter("$share//owntracks/+/+")) == nil)
        #expect((try? MQTTTopicFilter("a/b+")) == nil)
        #expect((try? MQTTTopicFilter("a/#/b")) == nil)
        #expect((try? MQTTTopicFilter("")) == nil)
    }

    @Test("Home Assistant object ids are lower-case and stay distinct")
    func objectIDs() {
        #expect(DeviceKey.objectID("car_1") == "car_1")
        let a = DeviceKey.objectID("a/b")
        let b = DeviceKey.objectID("a_b")
        #expect(a != b)
        #expect(a.hasPrefix("a_b_"))
        #expect(a.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "_" })
    }
}

extension ParseOutcome {
    func isDropped(_ reason: DropReason) -> Bool {
        if case .dropped(reason, _) = self { true } else { false }
    }
}
