import AmpelMessages
import AmpelMQTT
@testable import AmpelDaemon
import AmpelDomain
import Foundation
import Testing

/// The state file's own reader against `JSONDecoder`, the reader it replaced (13 s for
/// 1,000,000 devices): the same state from every valid file, a refusal for every file
/// `JSONDecoder` refuses.
@Suite("State file reader")
struct StateFileReaderTests {
    static let bavaria = Signal.DistrictRef(ags: "09162", name: "SK München", state: "Bayern", type: "SK")

    /// A state with what the writer must escape and the reader must decode.
    static func sample() -> PersistedState {
        var devices = DeviceTable()
        devices["alice/phone"] = DeviceRecord(lat: 48.137, lon: 11.575, tst: 1_600_000_000, lang: "de", district: bavaria,
                                              phase: "red", dataDate: "2020-10-15", stale: false, owntracks: true)
        devices["quote\"back\\slash"] = DeviceRecord(lat: -0.5, lon: 1e-7, tst: -1, lang: nil, district: nil,
                                                      phase: "outside", dataDate: "2020-10-15", stale: true)
        devices["café ☕️ 𝄞"] = DeviceRecord(lat: 90, lon: -180, tst: Int(Int32.max) * 4, lang: "en",
                                            district: Signal.DistrictRef(ags: "08111", name: "Stuttgart", state: "Baden-Württemberg", type: nil),
                                            phase: "outside", dataDate: "2020-11-05", stale: false)
        devices["tab\there\u{1}"] = DeviceRecord(lat: 47.1234567890123, lon: 10, tst: 0, lang: nil, district: bavaria,
                                                 phase: "darkred", dataDate: "2020-11-05", stale: false)
        // Seen only in old fixes: its first alert is still due (`alerts.max_fix_age`).
        devices["bob/queued"] = DeviceRecord(lat: 48.1, lon: 11.6, tst: 1_599_990_000, lang: nil, district: bavaria,
                                             phase: "red", dataDate: "2020-10-15", stale: false, owntracks: true, announced: false)
        let mark = JournalMark(segment: 3, handled: 10, lastSeq: 12, lastAlertID: 4, pendingAlerts: [
            PendingAlert(id: 4, message: OutgoingMessage(topic: "ampel/device/a/alert", text: #"{"to":"red"}"#, qos: .atLeastOnce, retain: false,
                                                         expiry: .seconds(3600)),
                         witness: Witness(topic: "ampel/device/a/state", payload: Array(#"{"phase":"red"}"#.utf8))),
        ])
        return PersistedState(devices: devices, districts: ["09162": "red", "09184": "yellow"], journal: mark)
    }

    @Test("what StateStore writes reads back equal, and equal to JSONDecoder's reading")
    func roundTrip() throws {
        let directory = NSTemporaryDirectory() + "state-reader-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = StateStore(directory: directory)
        try store.prepare()
        let state = Self.sample()
        try store.save(state)
        let data = try Data(contentsOf: URL(fileURLWithPath: store.path))
        let read = try StateFileReader.read(data)
        #expect(read == state)
        #expect(read == (try JSONDecoder().decode(PersistedState.self, from: data)))
        #expect(try store.load() == state)
    }

    @Test("any valid JSON of the file's shape: members in another order, white space, escapes, unknown members")
    func otherSpellings() throws {
        let text = """
         { "devices" : { "\\u0063af\\u00e9\\ud834\\udd1e" : { "stale":false ,"phase":"green","extra":[1,{"x":null}],
            "dataDate":"2020-10-15","tst":5,"lon":1.5E1,"lat":-2.25e-1,"district":{"type":null,"state":"Bayern","ags":"09171","name":"LK Alt\\u00f6tting","more":true} },
            "b":{"lat":0,"lon":0,"tst":0,"phase":"outside","dataDate":"2020-10-15","stale":true,"owntracks":null},
            "c":{"owntracks":true,"lat":0,"lon":0,"tst":0,"phase":"outside","dataDate":"2020-10-15","stale":true,"announced":false},
            "d":{"lat":0,"lon":0,"tst":0,"phase":"outside","dataDate":"2020-10-15","stale":true,"announced":null} },
          "future":{"a":[true,false,null,"s"]}, "districts":{"09171":"green"}, "version":1 }\r\n
        """
        let data = Data(text.utf8)
        let decoded = try JSONDecoder().decode(PersistedState.self, from: data)
        let read = try StateFileReader.read(data)
        #expect(read == decoded)
        #expect(read.devices["caf\u{e9}\u{1D11E}"]?.district?.name == "LK Altötting")
        #expect(read.devices["b"]?.lang == nil && read.devices["b"]?.district == nil)
        #expect(read.devices["b"]?.owntracks == false && read.devices["c"]?.owntracks == true)
        // A file of a version before `announced`: every device in it was announced.
        #expect(read.devices["b"]?.announced == true && read.devices["c"]?.announced == false && read.devices["d"]?.announced == true)
        #expect(read.journal == nil)
    }

    @Test("every file JSONDecoder refuses is refused: cut at every byte, wrong types, missing members, bad escapes")
    func refusals() throws {
        let directory = NSTemporaryDirectory() + "state-reader-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = StateStore(directory: directory)
        try store.prepare()
        try store.save(Self.sample())
        let whole = try Data(contentsOf: URL(fileURLWithPath: store.path))
        var refused = 0
        for length in 0..<whole.count {
            let cut = whole.prefix(length)
            // A cut inside the trailing white space still holds the whole document.
            guard (try? JSONDecoder().decode(PersistedState.self, from: cut)) == nil else { continue }
            #expect(throws: StateFileReader.Failure.self, "cut at \(length)") { try StateFileReader.read(cut) }
            refused += 1
        }
        #expect(refused >= whole.count - 2)
        let device = #""d":{"lat":1,"lon":2,"tst":3,"phase":"red","dataDate":"2020-10-15","stale":false}"#
        let bad = [
            "", "garbage", "[]", "null", #"{"version":1,"districts":{}}"#, #"{"version":1,"devices":{}}"#,
            #"{"districts":{},"devices":{}}"#, #"{"version":"1","districts":{},"devices":{}}"#,
            #"{"version":1.5,"districts":{},"devices":{}}"#,
            #"{"version":1,"districts":{},"devices":{"d":{"lat":1,"lon":2,"tst":3,"phase":"red","stale":false}}}"#,
            #"{"version":1,"districts":{},"devices":{"d":{"lat":"1","lon":2,"tst":3,"phase":"red","dataDate":"x","stale":false}}}"#,
            #"{"version":1,"districts":{},"devices":{"d":{"lat":1,"lon":2,"tst":3,"phase":"red","dataDate":"x","stale":0}}}"#,
            #"{"version":1,"districts":{},"devices":{"d":{"lat":1,"lon":2,"tst":3.5,"phase":"red","dataDate":"x","stale":false}}}"#,
            #"{"version":1,"districts":{},"devices":{"d":{"lat":01,"lon":2,"tst":3,"phase":"red","dataDate":"x","stale":false}}}"#,
            #"{"version":1,"districts":{},"devices":{"\ud834":{"lat":1,"lon":2,"tst":3,"phase":"red","dataDate":"x","stale":false}}}"#,
            #"{"version":1,"districts":{},"devices":{"\q":{"lat":1,"lon":2,"tst":3,"phase":"red","dataDate":"x","stale":false}}}"#,
            #"{"version":1,"districts":{"a":1},"devices":{}}"#,
            #"{"version":1,"districts":{},"devices":{"d":{"lat":1,"lon":2,"tst":3,"phase":"red","dataDate":"x","stale":false,"owntracks":1}}}"#,
            #"{"version":1,"districts":{},"devices":{"d":{"lat":1,"lon":2,"tst":3,"phase":"red","dataDate":"x","stale":false,"announced":0}}}"#,
            #"{"version":1,"districts":{},"devices":{"# + device + "}} x",
            #"{"version":1,"districts":{},"devices":{"# + device.replacingOccurrences(of: #""tst":3"#, with: #""tst":99999999999999999999"#) + "}}",
        ]
        for text in bad {
            let data = Data(text.utf8)
            #expect((try? JSONDecoder().decode(PersistedState.self, from: data)) == nil, "JSONDecoder reads \(text)")
            #expect(throws: StateFileReader.Failure.self, "\(text)") { try StateFileReader.read(data) }
        }
        // Stricter than JSONDecoder, which takes a trailing comma: the file is Ampel's own.
        #expect(throws: StateFileReader.Failure.self) {
            try StateFileReader.read(Data((#"{"version":1,"districts":{},"devices":{"# + device + ",}}").utf8))
        }
        // Invalid UTF-8 in a key.
        var invalid = Data(#"{"version":1,"districts":{},"devices":{""#.utf8)
        invalid.append(contentsOf: [0xC3, 0x28])
        invalid.append(contentsOf: Data(#"":{"lat":1,"lon":2,"tst":3,"phase":"red","dataDate":"x","stale":false}}}"#.utf8))
        #expect(throws: StateFileReader.Failure.self) { try StateFileReader.read(invalid) }
    }
}
