import AmpelCore
import Testing

/// The scanner reports exactly the top-level members and refuses anything that is not JSON.
@Suite struct JSONScannerTests {
    private func members(_ text: String) throws(JSONScanError) -> [(String, JSONValue)] {
        var found: [(String, JSONValue)] = []
        try JSONScanner.scanTopLevel(Array(text.utf8)) { key, value in
            found.append((String(decoding: key.utf8, as: UTF8.self), value))
        }
        return found
    }

    private func string(_ text: String) -> JSONValue { .string(JSONText(utf8: text.utf8)) }

    @Test func reportsTopLevelMembersInOrder() throws {
        let found = try members(#"  {"a": 1, "b": "two", "c": true, "d": false, "e": null, "f": {}, "g": [] } "#)
        #expect(found.map(\.0) == ["a", "b", "c", "d", "e", "f", "g"])
        #expect(found.map(\.1) == [.number(JSONNumber(start: 8, end: 9)), string("two"), .bool(true), .bool(false), .null, .object, .array])
    }

    @Test func nestedAndQuotedPhaseIsNotReported() throws {
        // The daemon's signal object nests `district.state`; a "phase" in a nested object,
        // an array or inside a string must not be taken for the top-level one.
        let json = #"{"district":{"ags":"09162","phase":"green","state":"BY"},"rules":["\"phase\":\"red\"",{"phase":"yellow"}],"title":"\"phase\": \"darkred\"","phase":"red"}"#
        let found = try members(json)
        #expect(found.map(\.0) == ["district", "rules", "title", "phase"])
        #expect(found.last?.1 == string("red"))
    }

    @Test func decodesEscapesInKeysAndValues() throws {
        let found = try members(#"{"ph\u0061se":"re\u0064","x":"\"\\\/\b\f\n\r\t","emoji":"\ud83d\ude00"}"#)
        #expect(found[0].0 == "phase")
        #expect(found[0].1 == string("red"))
        #expect(found[1].1 == string("\"\\/\u{8}\u{c}\n\r\t"))
        #expect(found[2].1 == string("😀"))
    }

    @Test func longStringsAreTruncatedAndNeverEqual() throws {
        let long = String(repeating: "r", count: 100)
        var value: JSONValue?
        try JSONScanner.scanTopLevel(Array("{\"phase\":\"\(long)\"}".utf8)) { _, v in value = v }
        guard case .string(let text)? = value else { Issue.record("no string"); return }
        #expect(text.isTruncated)
        #expect(text.utf8.count == JSONText.capacity)
        #expect(!text.equals("rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"))
    }

    @Test(arguments: [
        "", " ", "[]", "\"phase\"", "red", "null", "1",
        "{", "{\"phase\"", "{\"phase\":", "{\"phase\":\"red\"", "{\"phase\":\"red\",}",
        "{\"phase\":\"red\"} x", "{\"phase\":\"red\"}}", "{\"phase\" \"red\"}", "{phase:\"red\"}",
        "{'phase':'red'}", "{\"phase\":\"red\" \"stale\":false}", "{\"a\":01}", "{\"a\":-}", "{\"a\":1.}",
        "{\"a\":.5}", "{\"a\":1e}", "{\"a\":+1}", "{\"a\":tru}", "{\"a\":nul}", "{\"a\":[1,]}", "{\"a\":[1 2]}",
        "{\"a\":{\"b\"}}", "{\"a\":{\"b\":1]}", "{\"a\":[}", "{\"a\":\"x\ny\"}", "{\"a\":\"\\x\"}",
        "{\"a\":\"\\u12\"}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}", "{\"a\":\"\\ud800\\u0041\"}",
        "{,}", "{\"a\":1,,\"b\":2}", "{\"a\":NaN}", "{\"a\":Infinity}",
    ])
    func refusesMalformedDocuments(_ text: String) {
        #expect(throws: JSONScanError.self) { try members(text) }
    }

    @Test func refusesInvalidUTF8InStrings() {
        for bad: [UInt8] in [[0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xE2, 0x82], [0x80], [0xFF]] {
            let document = Array("{\"a\":\"".utf8) + bad + Array("\"}".utf8)
            #expect(throws: JSONScanError.self) { try JSONScanner.scanTopLevel(document) { _, _ in } }
        }
        let good = Array("{\"a\":\"".utf8) + [0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80] + Array("\"}".utf8)
        #expect(throws: Never.self) { try JSONScanner.scanTopLevel(good) { _, _ in } }
    }

    @Test func refusesDeepNestingWithoutRecursing() {
        let deep = "{\"a\":" + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}"
        // Over the length limit: refused before scanning.
        #expect(throws: JSONScanError.tooLong) { try members(deep) }
        let nested = "{\"a\":" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}"
        #expect(throws: JSONScanError.tooDeep) { try members(nested) }
        let ok = "{\"a\":" + String(repeating: "[", count: 30) + String(repeating: "]", count: 30) + "}"
        #expect(throws: Never.self) { try members(ok) }
    }

    @Test func acceptsNumbersOfEveryShape() throws {
        let found = try members(#"{"a":0,"b":-0,"c":12.5e-3,"d":1E+9,"e":-7.25,"f":[1,{"g":[null,true]}]}"#)
        #expect(found.count == 6)
        let text = #"{"a":0,"b":-0,"c":12.5e-3,"d":1E+9,"e":-7.25,"f":[1,{"g":[null,true]}]}"#
        let numbers: [String] = found.dropLast().compactMap {
            guard case .number(let n) = $0.1 else { return nil }
            return String(decoding: Array(text.utf8)[n.start..<n.end], as: UTF8.self)
        }
        #expect(numbers == ["0", "-0", "12.5e-3", "1E+9", "-7.25"])
    }

    @Test func numberPositionsHonourASliceStart() throws {
        let bytes = Array("xx{\"lat\": 48.5 ,\"lon\":-11}".utf8)
        var found: [JSONNumber] = []
        try JSONScanner.scanTopLevel(bytes[2...]) { _, value in
            if case .number(let n) = value { found.append(n) }
        }
        #expect(found.map { String(decoding: bytes[$0.start..<$0.end], as: UTF8.self) } == ["48.5", "-11"])
    }

    @Test func lengthLimitIsTheCallers() throws {
        let long = Array(("{\"a\":\"" + String(repeating: "x", count: 20_000) + "\"}").utf8)
        #expect(throws: JSONScanError.tooLong) { try JSONScanner.scanTopLevel(long) { _, _ in } }
        #expect(throws: Never.self) { try JSONScanner.scanTopLevel(long, maximumLength: 65_536) { _, _ in } }
    }

    @Test func worksOnAnArraySlice() throws {
        // The board glue hands in buffers; the scanner must honour a non-zero start index.
        let bytes = Array("xx{\"phase\":\"red\"}".utf8)
        var seen: JSONValue?
        try JSONScanner.scanTopLevel(bytes[2...]) { _, value in seen = value }
        #expect(seen == string("red"))
    }
}
