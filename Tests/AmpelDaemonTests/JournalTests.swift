import AmpelMessages
import AmpelMQTT
@testable import AmpelDaemon
import Foundation
import Logging
import Testing

/// The journal's pairing of a decision with the alert that announces it, read back as a
/// restart reads it (``JournalReplay``). The moment between the two records cannot be hit by a
/// kill from outside (`RunCrashTests` kills the built daemon everywhere else); here the trace
/// such a kill leaves, an alert with nothing after it, is written on purpose.
@Suite("Journal: a decision and its alert")
struct JournalTests {
    static let alert = OutgoingMessage(topic: "ampel/district/09162/alert", text: #"{"from":"red","to":"darkred"}"#, qos: .atLeastOnce, retain: false)
    static let witness = Witness(topic: "ampel/district/09162/phase", payload: Array("darkred".utf8))

    func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-journal-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func open(_ directory: String) throws -> (Journal, JournalReplay) {
        let replay = JournalReplay.read(directory: directory, over: PersistedState())
        return (try Journal(directory: directory, continuing: replay, logger: Logger(label: "test")), replay)
    }

    @Test("a decision journaled with its alert comes back with the alert pending")
    func pair() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (journal, _) = try open(dir)
        let id = try #require(journal.append(.district(ags: "09162", phase: "darkred"), announcedBy: [Self.alert], witness: Self.witness).first)
        let replay = JournalReplay.read(directory: dir, over: PersistedState())
        #expect(replay.state.districts["09162"] == "darkred")
        #expect(replay.pendingAlerts.map(\.id) == [id])
        #expect(replay.alertsWithoutDecision == 0)
    }

    @Test("an alert whose decision the process did not live to write is dropped, also by later restarts")
    func alertWithoutDecision() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let (journal, _) = try open(dir)
            let kept = try #require(journal.append(.district(ags: "09171", phase: "red"), announcedBy: [Self.alert], witness: nil).first)
            // What a kill between the two records of a pair leaves: the alert, and nothing after it.
            _ = journal.appendAlert(Self.alert, witness: Self.witness)
            let replay = JournalReplay.read(directory: dir, over: PersistedState())
            #expect(replay.pendingAlerts.map(\.id) == [kept])
            #expect(replay.alertsWithoutDecision == 1)
            #expect(replay.state.districts["09162"] == nil, "the decision is made again by the start")
        }
        // The next run writes a segment of its own; the cut pair stays what it was.
        let (next, first) = try open(dir)
        #expect(first.alertsWithoutDecision == 1)
        next.append(.district(ags: "09162", phase: "darkred"))
        let replay = JournalReplay.read(directory: dir, over: PersistedState())
        #expect(replay.pendingAlerts.count == 1)
        #expect(replay.alertsWithoutDecision == 1)
    }

    static let transition = OutgoingMessage(topic: "owntracks/alice/ampel/event", text: #"{"_type":"transition","desc":"Red"}"#, qos: .atLeastOnce,
                                            retain: false, expiry: .seconds(3600))

    @Test("an alert and its OwnTracks transition are journaled with their decision: both pending, both with the witness")
    func alertAndTransition() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (journal, _) = try open(dir)
        let record = DeviceRecord(lat: 48.1, lon: 11.5, tst: 7, lang: "de", district: nil, phase: "red", dataDate: "2020-10-15", stale: false,
                                  owntracks: true)
        let deviceAlert = OutgoingMessage(topic: "ampel/device/alice/phone/alert", text: #"{"to":"red"}"#, qos: .atLeastOnce, retain: false)
        let witness = Witness(topic: "ampel/device/alice/phone/state", payload: Array(#"{"phase":"red","tst":7}"#.utf8))
        let ids = journal.append(.device(key: "alice/phone", record: record), announcedBy: [deviceAlert, Self.transition], witness: witness)
        #expect(ids.count == 2)
        let replay = JournalReplay.read(directory: dir, over: PersistedState())
        #expect(replay.state.devices["alice/phone"] == record, "the record keeps that the device is an OwnTracks phone")
        #expect(replay.pendingAlerts.map(\.id) == ids)
        #expect(replay.pendingAlerts.map(\.message) == [deviceAlert, Self.transition])
        #expect(replay.pendingAlerts.allSatisfy { $0.witness == witness })
    }

    @Test("a device seen only in old fixes reads back unannounced; every flag of the record's byte keeps its bit")
    func unannouncedRecord() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (journal, _) = try open(dir)
        var records: [String: DeviceRecord] = [:]
        for (index, (stale, owntracks, announced)) in [(false, false, false), (true, true, false), (false, true, true), (true, false, true)].enumerated() {
            let record = DeviceRecord(lat: 48.1, lon: 11.5, tst: 7, lang: nil, district: nil, phase: "outside", dataDate: "2020-10-15",
                                      stale: stale, owntracks: owntracks, announced: announced)
            records["device/\(index)"] = record
            journal.append(.device(key: "device/\(index)", record: record))
        }
        let replay = JournalReplay.read(directory: dir, over: PersistedState())
        #expect(replay.state.devices.records == records)
    }

    @Test("an alert and a transition whose decision the process did not live to write are both dropped")
    func alertsWithoutDecision() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (journal, _) = try open(dir)
        let kept = try #require(journal.append(.district(ags: "09171", phase: "red"), announcedBy: [Self.alert], witness: nil).first)
        // What a kill after the two announcements of one decision, before the decision, leaves.
        _ = journal.appendAlert(Self.alert, witness: Self.witness)
        _ = journal.appendAlert(Self.transition, witness: Self.witness)
        let replay = JournalReplay.read(directory: dir, over: PersistedState())
        #expect(replay.pendingAlerts.map(\.id) == [kept])
        #expect(replay.alertsWithoutDecision == 2)
    }
}

@Suite("Journal: the record checksum")
struct CRC32CTests {
    @Test("CRC-32C by the table and by the CPU's instruction: the standard check value, and the same value for every length and alignment")
    func hardwareAndTableAgree() {
        // The check value of CRC-32C (RFC 3720, appendix B.4; "123456789").
        Array("123456789".utf8).withUnsafeBytes { bytes in
            #expect(CRC32C.tableChecksum(bytes) == 0xE306_9283)
            #expect(CRC32C.checksum(bytes) == 0xE306_9283)
        }
        #if arch(x86_64)
        // Every x86-64 machine this runs on has SSE4.2; the fallback alone would pass the rest.
        #expect(CRC32C.hardware)
        #endif
        var generator = SystemRandomNumberGenerator()
        let data = (0..<1_100).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        data.withUnsafeBytes { all in
            for start in 0..<9 {
                for length in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 120, 250, 1_024] {
                    let bytes = UnsafeRawBufferPointer(rebasing: all[start..<(start + length)])
                    #expect(CRC32C.checksum(bytes, hardware: CRC32C.hardware) == CRC32C.tableChecksum(bytes), "start \(start), length \(length)")
                }
            }
        }
    }
}

extension Journal {
    /// ``append(_:announcedBy:witness:finish:)`` with the messages as they are.
    func append(_ change: SignalEngine.Change, announcedBy messages: [OutgoingMessage], witness: Witness?) -> [UInt64] {
        append(change, announcedBy: messages, witness: witness) { message, _ in message }.map(\.id)
    }
}
