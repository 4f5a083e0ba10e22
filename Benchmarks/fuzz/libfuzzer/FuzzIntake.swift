// libFuzzer target for the daemon's intake (issue 14): the payload scanner (AmpelCore.JSONScanner),
// the three input parsers (InputParser.parse), the device-key rules (DeviceKey) and Traccar's
// time parser (InternetTime). Compiled by Benchmarks/fuzz/libfuzzer.sh together with the shipped
// files of Sources/AmpelDaemon/Intake (no copies); libFuzzer supplies `main`.
//
// The first byte of an input picks what is fuzzed:
//   0, 1, 2  OwnTracks, plain, Traccar: byte 1 is the length n of a topic key (n % 64), the next
//            n bytes the key (decoded as UTF-8 with repair, as a topic always is), the rest the payload
//   3        a device key: isSafe against a reference written here from docs/topics.md, sanitize,
//            objectID
//   4        an RFC 3339 time: InternetTime.parse, and format/parse round trips
//   5        the bare scanner: scanTopLevel on any bytes
// Besides not crashing, every outcome is checked against what docs/topics.md promises; the
// OwnTracks and plain parsers are also checked against JSONDecoder (the scanner may refuse what
// JSONDecoder takes, never the other way round, and what both take must read the same). A broken
// promise prints the input and aborts, and libFuzzer keeps the input as a crash artifact.
import AmpelCore
import AmpelDomain
import Foundation

/// The parser under test; a small limit so the oversized path is reachable within -max_len.
let parser = InputParser(maxPayload: 2048)

/// With FUZZ_OUTCOMES=1, how often each input ended in each outcome, printed at exit: run the
/// corpus once (`-runs=0`) to see that it reaches every reason of every input.
nonisolated(unsafe) var outcomes: [String: Int] = [:]
let countOutcomes: Bool = {
    guard ProcessInfo.processInfo.environment["FUZZ_OUTCOMES"] == "1" else { return false }
    atexit {
        for (name, count) in outcomes.sorted(by: { $0.key < $1.key }) {
            FileHandle.standardError.write(Data("outcome \(name) \(count)\n".utf8))
        }
    }
    return true
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let rest = Array(bytes.dropFirst())
    switch mode % 6 {
    case 0: checkInput(.owntracks, rest)
    case 1: checkInput(.plain, rest)
    case 2: checkInput(.traccar, rest)
    case 3: checkKey(String(decoding: rest, as: UTF8.self))
    case 4: checkTime(String(decoding: rest, as: UTF8.self))
    default: try? JSONScanner.scanTopLevel(rest) { _, _ in }
    }
    return 0
}

func broken(_ promise: String, _ input: [UInt8], _ detail: Any) -> Never {
    let shown = String(decoding: input.prefix(600), as: UTF8.self).debugDescription
    FileHandle.standardError.write(Data("BROKEN PROMISE: \(promise)\n  input: \(shown)\n  got: \(detail)\n".utf8))
    abort()
}

// MARK: Input parsers

func checkInput(_ kind: InputKind, _ input: [UInt8]) {
    let keyLength = input.isEmpty ? 0 : min(Int(input[0]) % 64, input.count - 1)
    let key = String(decoding: input.dropFirst().prefix(keyLength), as: UTF8.self)
    let payload = Array(input.dropFirst(1 + keyLength))
    let outcome = parser.parse(kind, topicKey: key, payload: payload)
    // Pure: the same bytes give the same outcome.
    let again = parser.parse(kind, topicKey: key, payload: payload)
    if outcome != again { broken("parse is deterministic", payload, (outcome, again)) }
    if countOutcomes {
        let name: String
        switch outcome {
        case .fix(let fix): name = fix.langIgnored ? "fix(lang ignored)" : fix.tst == nil ? "fix(no tst)" : "fix"
        case .skipped(let type): name = "skipped(\(type))"
        case .dropped(let reason, _): name = "dropped(\(reason))"
        }
        outcomes["\(kind.rawValue) \(name)", default: 0] += 1
    }

    switch outcome {
    case .fix(let fix):
        if payload.count > parser.maxPayload { broken("oversized payloads are dropped unread", payload, fix) }
        guard fix.latitude.isFinite, fix.longitude.isFinite, (-90...90).contains(fix.latitude), (-180...180).contains(fix.longitude) else {
            broken("coordinates are finite and within ±90/±180", payload, fix)
        }
        if let tst = fix.tst, !(0..<1_000_000_000_000).contains(tst) { broken("tst is 0 to below 10^12", payload, fix) }
        if !DeviceKey.isSafe(fix.device) || !referenceIsSafe(fix.device) { broken("a fix's device key is safe", payload, fix) }
        if let lang = fix.lang, Language(known: lang) == nil || fix.langIgnored { broken("a kept lang is a known language", payload, fix) }
        if kind != .plain, fix.lang != nil || fix.langIgnored { broken("only the plain input reads lang", payload, fix) }
        if kind == .traccar {
            if !fix.device.unicodeScalars.allSatisfy(isSanitized) { broken("a Traccar key is sanitized", payload, fix) }
        } else if fix.device != key {
            broken("the device key is the topic key", payload, (key, fix))
        }
    case .skipped(let type):
        if kind != .owntracks { broken("only OwnTracks skips messages", payload, type) }
    case .dropped(let reason, _):
        if reason == .oversized, payload.count <= parser.maxPayload { broken("only payloads over the limit are oversized", payload, reason) }
        if reason == .outOfOrder { broken("parsers never decide out-of-order", payload, reason) }
        if reason == .unsafeDeviceKey, kind != .traccar, DeviceKey.isSafe(key) { broken("a safe topic key is not refused", payload, (key, outcome)) }
    }
    if kind != .traccar, payload.count <= parser.maxPayload { compareWithJSONDecoder(kind, key: key, payload, outcome) }
}

func isSanitized(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar {
    case "A"..."Z", "a"..."z", "0"..."9", ".", "_", "-": true
    default: false
    }
}

/// A top-level member as JSONDecoder reads it.
enum OracleMember: Equatable {
    case null, number(Double), text(String), other
}

struct Oracle: Decodable {
    var members: [String: OracleMember] = [:]
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        for key in container.allKeys {
            if (try? container.decodeNil(forKey: key)) == true {
                members[key.stringValue] = .null
            } else if let number = try? container.decode(Double.self, forKey: key) {
                members[key.stringValue] = .number(number)
            } else if let text = try? container.decode(String.self, forKey: key) {
                members[key.stringValue] = .text(text)
            } else {
                members[key.stringValue] = .other
            }
        }
    }
}

/// The OwnTracks and plain parsers read with JSONScanner; JSONDecoder is the oracle. The scanner
/// may be stricter (malformed number tokens, invalid UTF-8 in a string JSONDecoder never reads),
/// never laxer, and what both read must be read the same.
func compareWithJSONDecoder(_ kind: InputKind, key: String, _ payload: [UInt8], _ outcome: ParseOutcome) {
    if kind == .owntracks, payload.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) == UInt8(ascii: "[") {
        return  // arrays are checked with JSONSerialization by the parser itself
    }
    let oracle = try? JSONDecoder().decode(Oracle.self, from: Data(payload))
    guard let oracle else {
        switch outcome {
        case .dropped(.notJSON, _): return
        default: broken("what JSONDecoder refuses as an object is not-json", payload, outcome)
        }
    }
    if case .dropped(.notJSON, _) = outcome { return }  // stricter: allowed
    // A key given twice: which one JSONDecoder keeps is not specified; the scanner keeps the last.
    var seen = Set<[UInt8]>()
    var duplicate = false
    try? JSONScanner.scanTopLevel(payload) { name, _ in
        if !name.isTruncated, !seen.insert(name.utf8).inserted { duplicate = true }
    }
    if duplicate { return }
    func number(_ name: String) -> Double?? {  // nil: missing; .some(nil): not a number
        switch oracle.members[name] {
        case nil, .null?: return nil
        case .number(let value)?: return .some(value)
        default: return .some(nil)
        }
    }
    if kind == .owntracks {
        guard case .text(let type)? = oracle.members["_type"] else {
            if case .skipped = outcome { return }
            broken("no string _type is skipped", payload, outcome)
        }
        if type != "location" {
            if case .skipped = outcome { return }
            broken("a _type other than location is skipped", payload, outcome)
        }
    }
    let lat = kind == .plain ? (number("lat") ?? number("latitude")) : number("lat")
    let lon = kind == .plain ? (number("lon") ?? number("longitude")) : number("lon")
    guard case .fix(let fix) = outcome else {
        // Dropped for a reason the oracle must see too.
        if case .dropped(let reason, _) = outcome {
            switch reason {
            case .missingCoordinates where lat == nil || lon == nil: return
            case .invalidCoordinates: return  // a value JSONDecoder reads as a number may be out of range
            case .invalidTimestamp where number("tst") != nil: return
            case .unsafeDeviceKey where !DeviceKey.isSafe(key): return
            default: broken("the drop reason matches what JSONDecoder reads", payload, (outcome, oracle.members))
            }
        }
        return
    }
    // JSONDecoder refuses a number that underflows (1e-400) where the scanner reads 0: the one
    // number both take as grammar but only one reads.
    func same(_ oracle: Double??, _ value: Double) -> Bool {
        switch oracle {
        case .some(.some(let read)): read == value
        case .some(nil): abs(value) < 1e-300
        case nil: false
        }
    }
    guard same(lat, fix.latitude), same(lon, fix.longitude) else {
        broken("a fix's coordinates are what JSONDecoder reads", payload, (fix, oracle.members))
    }
    switch number("tst") {
    case nil:
        if fix.tst != nil { broken("no tst reads as none", payload, fix) }
    case .some(let value?):
        if fix.tst != Int(value) { broken("tst is what JSONDecoder reads, fractions cut", payload, (fix, value)) }
    case .some(nil):
        if fix.tst != 0 { broken("a tst that is no number is dropped", payload, fix) }
    }
}

// MARK: Device keys

/// DeviceKey.isSafe as docs/topics.md words it, scalar by scalar (the shipped one runs a byte
/// loop first and looks at Unicode properties only beyond ASCII). Levels and the leading `$` are
/// looked at by scalar, never by Character: "/" followed by a combining mark is one Character
/// but still ends a topic level.
func referenceIsSafe(_ key: String) -> Bool {
    if key.isEmpty || key.utf8.count > DeviceKey.maxLength || key.unicodeScalars.first == "$" { return false }
    if key.unicodeScalars.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) { return false }
    for scalar in key.unicodeScalars {
        if scalar == "+" || scalar == "#" || scalar.value <= 0x20 || scalar.value == 0x7F { return false }
        if scalar.value >= 0x80 {
            if scalar.properties.isWhitespace { return false }
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate: return false
            default: break
            }
        }
    }
    return true
}

func checkKey(_ key: String) {
    let input = Array(key.utf8)
    let safe = DeviceKey.isSafe(key)
    if safe != referenceIsSafe(key) { broken("isSafe follows the documented rules", input, (safe, referenceIsSafe(key))) }
    if safe, DeviceKey.firstUnsafeScalar(key) != nil { broken("a safe key has no unsafe character", input, key) }
    if let sanitized = DeviceKey.sanitize(key) {
        if !DeviceKey.isSafe(sanitized) || !sanitized.unicodeScalars.allSatisfy(isSanitized) || !sanitized.contains(where: { $0 != "_" }) {
            broken("sanitize gives a safe key of A-Z a-z 0-9 . _ -", input, sanitized)
        }
        if sanitized.unicodeScalars.count != key.unicodeScalars.count { broken("sanitize replaces one for one", input, sanitized) }
    }
    let id = DeviceKey.objectID(key)
    if !id.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }) {
        broken("objectID is [a-z0-9_]", input, id)
    }
    let plain = key.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    if (id == key) != plain { broken("objectID keeps exactly the keys of [a-z0-9_]", input, id) }
}

// MARK: Times

func checkTime(_ text: String) {
    guard let seconds = InternetTime.parse(text) else { return }
    let input = Array(text.utf8)
    if !seconds.isFinite { broken("a parsed time is finite", input, seconds) }
    // Four-digit years and offsets below a day: within one day of 0000-01-01 ... 9999-12-31.
    if !(-62_167_219_200 - 86_400 ... 253_402_300_799 + 86_400).contains(seconds) { broken("a parsed time is within years 0-9999", input, seconds) }
    let formatted = InternetTime.format(secondsSince1970: seconds)
    if (-62_167_219_200 ... 253_402_300_799).contains(seconds) {
        guard let back = InternetTime.parse(formatted) else { broken("a formatted time parses", input, formatted) }
        if back != seconds.rounded(.down) { broken("format then parse gives the whole seconds", input, (formatted, back, seconds)) }
    }
}
