import AmpelMessages
import AmpelMQTT
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What the journal adds to the snapshot at start: the state as it was when the last run
/// ended, the messages it took but did not handle, and the alerts it decided but the broker
/// did not acknowledge.
struct JournalReplay: Sendable {
    /// The snapshot with every later decision applied.
    var state: PersistedState
    /// Messages taken from the broker and not handled, in arrival order.
    var pendingInputs: [(seq: UInt64, receivedAt: Int, message: MQTTMessage)] = []
    /// Alerts to hand over again, oldest first.
    var pendingAlerts: [(id: UInt64, message: OutgoingMessage, witness: Witness?)] = []
    /// The last run ended with a clean stop (its goodbye acknowledged): the broker holds what it published.
    var cleanStop = false
    /// Whether there was anything to read (a first start has neither snapshot mark nor journal).
    var found = false
    var lastSeq: UInt64 = 0
    var lastAlertID: UInt64 = 0
    var handled: UInt64 = 0
    var lastSegment = 0
    var snapshotSegment = 0
    var bytesSinceSnapshot = 0
    /// Every segment read, with its last input (0: none).
    var segments: [Int: UInt64] = [:]
    var records = 0
    /// Alerts dropped because the process died before their decision was journaled.
    var alertsWithoutDecision = 0
    /// Segments whose end was a torn record (the last write of a process that died), or that
    /// could not be read.
    var damaged: [String] = []

    /// Reads the journal segments in `directory` over `snapshot`.
    static func read(directory: String, over snapshot: PersistedState) -> JournalReplay {
        var replay = JournalReplay(state: snapshot)
        let mark = snapshot.journal ?? JournalMark()
        replay.found = snapshot.journal != nil
        replay.snapshotSegment = mark.segment
        replay.handled = mark.handled
        replay.lastSeq = mark.lastSeq
        replay.lastAlertID = mark.lastAlertID
        var alerts = Dictionary(uniqueKeysWithValues: mark.pendingAlerts.map { ($0.id, ($0.message, $0.witness)) })
        var inputs: [UInt64: (receivedAt: Int, message: MQTTMessage)] = [:]
        let numbers = Journal.segmentNumbers(in: directory)
        for number in numbers {
            replay.found = true
            replay.lastSegment = max(replay.lastSegment, number)
            replay.segments[number] = replay.segments[number] ?? 0
            let path = Journal.path(directory, segment: number)
            guard let bytes = FileManager.default.contents(atPath: path) else {
                replay.damaged.append("\(path): cannot be read")
                continue
            }
            let covered = number < mark.segment
            if !covered { replay.bytesSinceSnapshot += bytes.count }
            // The alerts read last, while no other record has followed them.
            var trailingAlerts: [UInt64] = []
            let end = bytes.withUnsafeBytes { buffer in
                JournalRecord.readAll(buffer) { record in
                    replay.records += 1
                    if case .alert = record {} else { trailingAlerts = [] }
                    if case .input(let seq, let receivedAt, let topic, let payload, let qos, let retain) = record {
                        replay.lastSeq = max(replay.lastSeq, seq)
                        replay.segments[number] = max(replay.segments[number] ?? 0, seq)
                        if seq > replay.handled {
                            inputs[seq] = (receivedAt, MQTTMessage(topic: topic, payload: payload, qos: MQTTQoS(rawValue: Int(qos)) ?? .atMostOnce,
                                                                   retain: retain))
                        }
                        // Messages taken after the goodbye change nothing on the broker: they are replayed.
                        return
                    }
                    // A covered segment's decisions are in the snapshot already.
                    guard !covered else { return }
                    replay.takeDecision(record, alerts: &alerts, trailingAlerts: &trailingAlerts)
                }
            }
            if case .torn(let offset) = end { replay.damaged.append("\(path): torn record at byte \(offset)") }
            // Alerts are written in one segment with the decision after them (``Journal/append(_:announcedBy:witness:finish:)``):
            // those that end their segment lost their decision with the process, before they were
            // handed over. The start decides again and announces them then; sending these too would repeat them.
            for id in trailingAlerts {
                alerts[id] = nil
                replay.alertsWithoutDecision += 1
            }
        }
        // No journal and no mark: a state file from before the journal, written at a clean stop.
        if !replay.found { replay.cleanStop = true }
        replay.pendingInputs = inputs.filter { $0.key > replay.handled }.sorted { $0.key < $1.key }
            .map { ($0.key, $0.value.receivedAt, $0.value.message) }
        replay.pendingAlerts = alerts.sorted { $0.key < $1.key }.map { ($0.key, $0.value.0, $0.value.1) }
        return replay
    }

    /// Takes a record after the snapshot's mark that is not an input: decisions, alerts and
    /// their answers, the clean stop. `trailingAlerts`: the alerts read last, while no other
    /// record has followed them.
    mutating func takeDecision(_ record: JournalRecord, alerts: inout [UInt64: (OutgoingMessage, Witness?)],
                               trailingAlerts: inout [UInt64]) {
        cleanStop = false
        switch record {
        case .input:
            break
        case .handled(let seq):
            handled = max(handled, seq)
        case .device(let key, let record):
            state.devices[key] = record
        case .district(let ags, let phase):
            state.districts[ags] = phase
        case .alert(let id, let message, let witness):
            lastAlertID = max(lastAlertID, id)
            alerts[id] = (message, witness)
            trailingAlerts.append(id)
        case .alertAcknowledged(let id):
            alerts[id] = nil
        case .alertRefused(let id):
            // Whatever the broker retains proves nothing: the alert itself was refused.
            if let alert = alerts[id] { alerts[id] = (alert.0, nil) }
        case .stopped:
            cleanStop = true
        case .forgotten(let key):
            state.devices[key] = nil
        }
    }
}
