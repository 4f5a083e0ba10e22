@testable import AmpelDaemon
import AmpelGeo
import Foundation
import AmpelDomain
import Testing

/// The OwnTracks and plain parsers read JSON with `AmpelCore.JSONScanner`, not `JSONDecoder`.
/// Here `JSONDecoder` is the oracle, on valid samples and thousands of seeded mutations:
/// - what `JSONDecoder` refuses, the scanner refuses (`not-json`);
/// - what the scanner accepts reads exactly as `JSONDecoder` reads it, field by field.
/// The scanner is stricter in one way only: `JSONDecoder` lets malformed number tokens
/// (`1-604`, `0604`, `12e`) and invalid UTF-8 pass the structure and fails just that value;
/// RFC 8259 says such a document is not JSON, and so does the daemon (`not-json`).
@Suite("Input parsers against JSONDecoder")
struct InputParserDifferentialTests {
    /// What `JSONDecoder` makes of one member: absent/null, a number, a string, or another type.
    enum Member: Equatable {
        case missing, number(Double), text(String), other
    }

    /// The oracle: the top-level object's members as `JSONDecoder` reads them.
    struct Oracle: Decodable {
        var members: [String: Member] = [:]

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: AnyKey.self)
            for key in c.allKeys {
                if (try? c.decodeNil(forKey: key)) == true {
                    members[key.stringValue] = .missing
                } else if let number = try? c.decode(Double.self, forKey: key) {
                    members[key.stringValue] = .number(number)
                } else if let text = try? c.decode(String.self, forKey: key) {
                    members[key.stringValue] = .text(text)
                } else {
                    members[key.stringValue] = .other
                }
            }
        }

        func number(_ key: String) -> Field<Double> {
            switch members[key] ?? .missing {
            case .missing: .missing
            case .number(let value): .value(value)
            default: .invalid
            }
        }
    }

    static let seeds = [
        #"{"_type":"location","lat":48.1374,"lon":11.5755,"tst":1604570400,"acc":12,"tid":"ph"}"#,
        #"{"lat":49.4521,"lon":11.0767,"tst":1604570400,"lang":"de"}"#,
        #"{"latitude":-33.5e-1,"longitude":1.5E2,"extra":{"lat":1,"nested":[1,2,{"lon":3}]}}"#,
        #"  {"lat" : 0 , "lon" : -0.0 , "tst" : null, "lang" : null}  "#,
        #"{"_type":"location","lat":"48.1","lon":11,"tst":"x"}"#,
    ]

    func oracle(_ bytes: [UInt8]) -> Oracle? {
        try? JSONDecoder().decode(Oracle.self, from: Data(bytes))
    }

    /// The outcome the plain parser should give, worked out from the oracle with the same rules.
    func expectedPlain(_ bytes: [UInt8], parser: InputParser) -> ParseOutcome {
        guard let oracle = oracle(bytes) else { return .dropped(.notJSON, detail: "not a JSON object") }
        func either(_ a: String, _ b: String) -> Field<Double> {
            let first = oracle.number(a)
            return first == .missing ? oracle.number(b) : first
        }
        // `lang`: kept when a whole string (the scanner keeps 32 bytes) of a language Ampel
        // speaks; any other present value is ignored and marked.
        var lang: String?
        var ignored = false
        switch oracle.members["lang"] {
        case nil, .missing?: break
        case .text(let text)? where text.utf8.count <= 32 && Language(known: text) != nil: lang = text
        default: ignored = true
        }
        let outcome = parser.makeFix(topicKey: "dev", lat: either("lat", "latitude"), lon: either("lon", "longitude"),
                                     tst: oracle.number("tst"), lang: lang, accuracy: oracle.number("acc"))
        guard ignored, case .fix(var fix) = outcome else { return outcome }
        fix.langIgnored = true
        return .fix(fix)
    }

    func mutate(_ seed: [UInt8], _ random: inout SplitMix64) -> [UInt8] {
        var bytes = seed
        let alphabet = Array(#"{}[]":,.-+eE0123456789 \ntrufalsn"latitude_typ\#u{00}\#u{7f}"#.utf8) + [0xC3, 0xA4, 0xFF]
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<3, using: &random) {
            case 0 where !bytes.isEmpty: bytes[position] = alphabet.randomElement(using: &random)!
            case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: position)
            default: if !bytes.isEmpty { bytes.remove(at: position) }
            }
        }
        return bytes
    }

    @Test("plain: seeded mutations read like JSONDecoder reads them")
    func plainAgreesWithJSONDecoder() {
        let parser = InputParser(maxPayload: 4096)
        var random = SplitMix64(seed: 0xA11CE)
        var objects = 0
        var fixes = 0
        var stricter = 0
        for round in 0..<20_000 {
            let seed = Array(Self.seeds[round % Self.seeds.count].utf8)
            let bytes = round < Self.seeds.count ? seed : mutate(seed, &random)
            let expected = expectedPlain(bytes, parser: parser)
            let actual = parser.parse(.plain, topicKey: "dev", payload: bytes)
            if oracle(bytes) != nil { objects += 1 }
            if case .fix = actual { fixes += 1 }
            if case .dropped(.notJSON, _) = actual, oracle(bytes) != nil {
                stricter += 1
                continue
            }
            // Details differ in wording only where the reason is the same.
            switch (actual, expected) {
            case (.dropped(let a, _), .dropped(let b, _)):
                #expect(a == b, "\(String(decoding: bytes, as: UTF8.self))")
            default:
                #expect(actual == expected, "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
        // The mutations must exercise both sides, or the comparison proves little.
        #expect(objects > 5_000)
        #expect(fixes > 2_000)
        #expect(stricter < objects / 4)
    }

    @Test("OwnTracks: seeded mutations read like JSONDecoder reads them")
    func ownTracksAgreesWithJSONDecoder() {
        let parser = InputParser(maxPayload: 4096)
        var random = SplitMix64(seed: 0x0417)
        let seed = Array(Self.seeds[0].utf8)
        for _ in 0..<10_000 {
            let bytes = mutate(seed, &random)
            let actual = parser.parse(.owntracks, topicKey: "dev", payload: bytes)
            guard bytes.first(where: { $0 != 0x20 && $0 != 0x0A }) != UInt8(ascii: "[") else { continue }
            guard let oracle = oracle(bytes) else {
                #expect(actual == .dropped(.notJSON, detail: "not a JSON object"), "\(String(decoding: bytes, as: UTF8.self))")
                continue
            }
            if case .dropped(.notJSON, _) = actual { continue }  // stricter, see above
            guard case .text(let type)? = oracle.members["_type"] else {
                if case .skipped = actual {} else { Issue.record("expected skipped: \(String(decoding: bytes, as: UTF8.self)) -> \(actual)") }
                continue
            }
            guard type == "location" else {
                if case .skipped = actual {} else { Issue.record("expected skipped: \(String(decoding: bytes, as: UTF8.self)) -> \(actual)") }
                continue
            }
            let expected = parser.makeFix(topicKey: "dev", lat: oracle.number("lat"), lon: oracle.number("lon"), tst: oracle.number("tst"), lang: nil,
                                          accuracy: oracle.number("acc"))
            switch (actual, expected) {
            case (.dropped(let a, _), .dropped(let b, _)): #expect(a == b, "\(String(decoding: bytes, as: UTF8.self))")
            default: #expect(actual == expected, "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
    }
}
