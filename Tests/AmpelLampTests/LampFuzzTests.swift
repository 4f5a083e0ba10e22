import AmpelCore
import AmpelLamp
import Foundation
import Testing

/// A small, seeded generator: the fuzz runs are the same on every machine and every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What Foundation's JSON decoder makes of a signal object: the independent oracle.
private struct OracleSignal: Decodable {
    var phase: String
    var stale: Bool?
    var staleWasNull = false

    enum CodingKeys: String, CodingKey { case phase, stale }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        phase = try container.decode(String.self, forKey: .phase)
        if container.contains(.stale) {
            if try container.decodeNil(forKey: .stale) {
                staleWasNull = true
            } else {
                stale = try container.decode(Bool.self, forKey: .stale)
            }
        }
    }
}

/// Random and mutated payloads: nothing traps, garbage never changes the phase, and every
/// payload the scanner accepts is one Foundation's decoder reads the same way.
@Suite struct LampFuzzTests {
    static let seeds: [String] = [
        ##"{"district":{"ags":"09162","name":"München","state":"Bayern"},"incidence":61.2,"phase":"red","color":"#FF0000","dataDate":"2020-10-25","rules":["Maske \"überall\"",{"phase":"green"}],"always":[],"stale":false}"##,
        #"{"phase":"darkred","stale":true}"#,
        #"{"stale":false,"phase":"outside","lat":-12.5e3,"tst":1603600000}"#,
        #"{"title":"\"phase\":\"green\"","ph\u0061se":"yellow","x":[[[{"a":null}]]]}"#,
        #"{"state":"offline"}"#,
    ]

    private func mutate(_ input: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
        var bytes = input
        let specials = Array(#"{}[]",:\\u0"tfn-.eE "#.utf8) + [0x00, 0x0A, 0x80, 0xC3, 0xFF]
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<7, using: &rng) {
            case 0 where !bytes.isEmpty: bytes[position] = UInt8.random(in: 0...255, using: &rng)
            case 1: bytes.insert(specials.randomElement(using: &rng)!, at: position)
            case 2 where !bytes.isEmpty: bytes.remove(at: position)
            case 3: bytes = Array(bytes.prefix(position))
            case 4 where !bytes.isEmpty:
                let end = Int.random(in: position...bytes.count, using: &rng)
                bytes.insert(contentsOf: bytes[position..<end], at: Int.random(in: 0...bytes.count, using: &rng))
            case 5 where !bytes.isEmpty: bytes[position] = specials.randomElement(using: &rng)!
            default:
                let words = ["\"phase\":\"green\",", "\"stale\":true,", "\\\"", "{\"phase\":", "]", "}"]
                bytes.insert(contentsOf: Array(words.randomElement(using: &rng)!.utf8), at: position)
            }
        }
        return bytes
    }

    private func occurrences(of needle: String, in bytes: [UInt8]) -> Int {
        let pattern = Array(needle.utf8)
        guard bytes.count >= pattern.count else { return 0 }
        return (0...(bytes.count - pattern.count)).filter { Array(bytes[$0..<$0 + pattern.count]) == pattern }.count
    }

    @Test func mutatedSignalObjectsAgreeWithFoundation() throws {
        var rng = SplitMix64(state: 0xA3_9E1)
        let decoder = JSONDecoder()
        var accepted = 0
        for round in 0..<20_000 {
            let seed = Array(Self.seeds[round % Self.seeds.count].utf8)
            let bytes = mutate(seed, &rng)
            let mine = LampPayload.signalObject(bytes)
            let oracle = try? decoder.decode(OracleSignal.self, from: Data(bytes))
            if let mine {
                accepted += 1
                // Sound: whatever the lamp accepts is valid JSON with that phase and stale flag.
                guard let oracle else {
                    Issue.record("accepted what Foundation refuses: \(String(decoding: bytes, as: UTF8.self))")
                    continue
                }
                #expect(LampSignal(utf8: Array(oracle.phase.utf8)) == mine.signal)
                #expect((oracle.stale ?? false) == mine.stale)
                #expect(!oracle.staleWasNull)
            }
        }
        // The mutations must exercise the accepting side, or this test proves nothing.
        // (Completeness is checked on generated documents below: Foundation's decoder is
        // laxer than RFC 8259 in values it skips, e.g. `1-2`, trailing commas, raw control
        // characters, so it cannot tell which mutants the lamp must accept.)
        #expect(accepted > 500)
    }

    /// Random valid JSON values, written with random white space and escape styles.
    private struct Writer {
        var rng: SplitMix64

        mutating func space() -> String {
            ["", "", " ", "\n  ", "\t", "\r\n"].randomElement(using: &rng)!
        }

        mutating func string(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case _ where scalar.value < 0x20 || Int.random(in: 0..<5, using: &rng) == 0:
                    for unit in String(scalar).utf16 { out += "\\u" + String(format: "%04x", unit) }
                case "/" where Bool.random(using: &rng): out += "\\/"
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }

        mutating func text() -> String {
            let pool: [Unicode.Scalar] = ["p", "h", "a", "s", "e", "r", "d", " ", "\"", "\\", "/", "\n", "\u{1}", "ü", "€", "😀", "{", "]", ":", ","]
            return String(String.UnicodeScalarView((0..<Int.random(in: 0...8, using: &rng)).map { _ in pool.randomElement(using: &rng)! }))
        }

        mutating func value(depth: Int) -> String {
            switch Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &rng) {
            case 0: return "null"
            case 1: return Bool.random(using: &rng) ? "true" : "false"
            case 2: return ["0", "-0", "12", "-3.25", "1e9", "6.02E+23", "-1.5e-7"].randomElement(using: &rng)!
            case 3: return string(["green", "red", "phase", "stale"].randomElement(using: &rng)!)
            case 4: return string(text())
            case 5:
                let items = (0..<Int.random(in: 0...3, using: &rng)).map { _ in space() + value(depth: depth + 1) + space() }
                return "[" + items.joined(separator: ",") + "]"
            default:
                let items = (0..<Int.random(in: 0...3, using: &rng)).map { _ -> String in
                    // Nested objects may well have their own "phase" and "stale".
                    let key = ["phase", "stale", "state", text()].randomElement(using: &rng)!
                    return space() + string(key) + space() + ":" + space() + value(depth: depth + 1) + space()
                }
                return "{" + items.joined(separator: ",") + "}"
            }
        }
    }

    @Test func generatedValidSignalObjectsAreRead() throws {
        var writer = Writer(rng: SplitMix64(state: 0xC0FFEE))
        let signals: [(String, LampSignal)] = [("green", .phase(.green)), ("yellow", .phase(.yellow)),
                                               ("red", .phase(.red)), ("darkred", .phase(.darkred)), ("outside", .outside)]
        for _ in 0..<5_000 {
            let (id, signal) = signals.randomElement(using: &writer.rng)!
            let stale: Bool? = [nil, true, false].randomElement(using: &writer.rng)!
            var members: [String] = []
            for _ in 0..<Int.random(in: 0...4, using: &writer.rng) {
                var key = writer.text()
                if key == "phase" || key == "stale" { key += "_" }
                members.append(writer.string(key) + writer.space() + ":" + writer.space() + writer.value(depth: 1))
            }
            members.insert(writer.string("phase") + ":" + writer.space() + writer.string(id), at: Int.random(in: 0...members.count, using: &writer.rng))
            if let stale {
                members.insert(writer.string("stale") + ":" + (stale ? "true" : "false"), at: Int.random(in: 0...members.count, using: &writer.rng))
            }
            let document = writer.space() + "{" + members.map { writer.space() + $0 + writer.space() }.joined(separator: ",") + "}" + writer.space()
            let bytes = Array(document.utf8)
            // The generator writes valid JSON: Foundation agrees.
            #expect(throws: Never.self) { try JSONSerialization.jsonObject(with: Data(bytes)) }
            let reading = LampPayload.signalObject(bytes)
            #expect(reading?.signal == signal, "\(document)")
            #expect(reading?.stale == (stale ?? false), "\(document)")
        }
    }

    @Test func randomBytesNeverChangeTheShownPhase() {
        var rng = SplitMix64(state: 7)
        let topics = try! LampTopics(follow: .device, id: "fuzz")
        var lamp = LampStateMachine(topics: topics)
        _ = lamp.event(.powerOn(at: 0))
        _ = lamp.event(.tick(at: 2000))
        _ = lamp.event(.message(topic: topics.signal, payload: Array(#"{"phase":"red"}"#.utf8)))
        #expect(lamp.pattern == .phase(.red))
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...64, using: &rng)
            var payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if Bool.random(using: &rng) { payload.insert(UInt8(ascii: "{"), at: 0) }
            let topic = Bool.random(using: &rng) ? topics.signal : topics.bridge
            #expect(lamp.event(.message(topic: topic, payload: payload)) == .none)
        }
        #expect(lamp.pattern == .phase(.red))
        #expect(lamp.ignoredMessages == 20_000)
    }

    @Test func mutatedMessagesChangeTheLampOnlyThroughValidReadings() {
        var rng = SplitMix64(state: 0xFEED)
        let topics = try! LampTopics(follow: .device, id: "fuzz")
        var lamp = LampStateMachine(topics: topics)
        _ = lamp.event(.tick(at: 1))
        var changes = 0
        for round in 0..<10_000 {
            let bytes = mutate(Array(Self.seeds[round % 4].utf8), &rng)
            let before = lamp.pattern
            let action = lamp.event(.message(topic: topics.signal, payload: bytes))
            if let reading = LampPayload.signalObject(bytes) {
                let expected: LampPattern = reading.stale ? .noSignal(.stale)
                    : { if case .phase(let p) = reading.signal { return .phase(p) } else { return .outside } }()
                #expect(lamp.pattern == expected)
                if before != expected { changes += 1; #expect(action == .show(expected)) }
            } else {
                #expect(action == .none)
                #expect(lamp.pattern == before)
            }
        }
        #expect(changes > 50)
    }

    @Test func plainPhaseTopicFuzz() {
        var rng = SplitMix64(state: 42)
        let topics = try! LampTopics(follow: .district, id: "09162")
        var lamp = LampStateMachine(topics: topics)
        _ = lamp.event(.message(topic: topics.signal, payload: Array("green".utf8)))
        let words = ["green", "yellow", "red", "darkred", "outside"].map { Array($0.utf8) }
        var validEdits = 0
        for _ in 0..<20_000 {
            var payload = words.randomElement(using: &rng)!
            // One random edit: almost always garbage, now and then still a valid id.
            let position = Int.random(in: 0...payload.count, using: &rng)
            if Bool.random(using: &rng), position < payload.count {
                payload[position] = UInt8.random(in: 0...255, using: &rng)
            } else {
                payload.insert(UInt8.random(in: 0...255, using: &rng), at: position)
            }
            let before = lamp.pattern
            _ = lamp.event(.message(topic: topics.signal, payload: payload))
            var trimmed = payload[...]
            while let first = trimmed.first, Array(" \t\r\n".utf8).contains(first) { trimmed = trimmed.dropFirst() }
            while let last = trimmed.last, Array(" \t\r\n".utf8).contains(last) { trimmed = trimmed.dropLast() }
            if let index = words.firstIndex(of: Array(trimmed)) {
                validEdits += 1
                #expect(lamp.signal == LampSignal(utf8: words[index]))
            } else {
                #expect(lamp.pattern == before)
            }
        }
        #expect(validEdits > 20)
    }
}
