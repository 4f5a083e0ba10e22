import AmpelMessages
@testable import AmpelDaemon
import AmpelDomain
import AmpelMQTT
import Foundation
import Logging
import Synchronization
import Testing

/// The executor's order, the one exactly-once rests on: an announcement is handed over only
/// after its decision is journaled with it, and before the retained publish that witnesses it.
/// The engine's real actions (a phone's first alert and transition, new data that changes
/// districts and devices) go through a journal and a transport that write into one log.
@Suite("ActionExecutor: journal, announcements, witness")
struct ActionExecutorTests {
    enum Entry: Equatable {
        /// A journal write: the change's key, the topics it announces, its witness (topic and
        /// payload), the ids the journal gave the announcements.
        case journaled(key: String, announced: [String], witness: String?, ids: [UInt64] = [])
        /// A publish handed over: its topic and payload.
        case handedOver(String)
        /// A webhook body queued: the webhook and the alert id that keys it.
        case notified(webhook: Int, alertID: UInt64)
    }

    final class Log: Sendable {
        let entries = Mutex<[Entry]>([])
        func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }
        var all: [Entry] { entries.withLock { $0 } }
    }

    final class RecordingJournal: DecisionJournal {
        let log: Log
        let lastID = Mutex<UInt64>(0)
        let acknowledged = Mutex<[UInt64]>([])
        let refused = Mutex<[UInt64]>([])
        init(_ log: Log) { self.log = log }

        static func key(_ change: SignalEngine.Change) -> String {
            switch change {
            case .device(let key, _), .forgotten(let key): key
            case .district(let ags, _): ags
            }
        }

        func append(_ change: SignalEngine.Change) {
            log.append(.journaled(key: Self.key(change), announced: [], witness: nil))
        }

        func append(_ change: SignalEngine.Change, announcedBy messages: [OutgoingMessage], witness: Witness?,
                    finish: (OutgoingMessage, UInt64) -> OutgoingMessage) -> [(id: UInt64, message: OutgoingMessage)] {
            let ids = lastID.withLock { last in
                messages.map { _ in
                    last += 1
                    return last
                }
            }
            log.append(.journaled(key: Self.key(change), announced: messages.map(\.topic),
                                  witness: witness.map { $0.topic + " " + String(decoding: $0.payload, as: UTF8.self) }, ids: ids))
            return zip(messages, ids).map { (id: $1, message: finish($0, $1)) }
        }

        func acknowledge(_ id: UInt64) { acknowledged.withLock { $0.append(id) } }
        func refuse(_ id: UInt64) { refused.withLock { $0.append(id) } }
    }

    /// Hands every publish to the log; acknowledges it at once unless `silent` (a broker that
    /// takes publishes and never answers).
    final class RecordingTransport: StubTransport {
        let log: Log
        let silent: Bool
        init(_ log: Log, silent: Bool = false) {
            self.log = log
            self.silent = silent
        }
        func publish(_ message: OutgoingMessage) async throws(MQTTError) { log.append(.handedOver(message.topic + " " + message.text)) }
        func enqueue(_ message: OutgoingMessage, acknowledged: (@Sendable (MQTTError?) -> Void)?) {
            log.append(.handedOver(message.topic + " " + message.text))
            if !silent { acknowledged?(nil) }
        }
    }

    /// Queues nothing; writes each webhook body's webhook and alert id to the log.
    final class RecordingWebhooks: WebhookQueue {
        let log: Log
        init(_ log: Log) { self.log = log }
        func send(webhook index: Int, alertID: String, payload: [UInt8], now: Double) {
            log.append(.notified(webhook: index, alertID: UInt64(alertID.split(separator: "-").last ?? "") ?? 0))
        }
    }

    /// A phone's first fix in München (alert, OwnTracks transition, two webhooks), then the
    /// November data: districts and the phone change phase.
    static func actions() -> [[SignalEngine.Action]] {
        var settings = Fixtures.settings(owntracks: OwnTracksNotices())
        settings.webhooks = [WebhookSettings(name: "de", url: "http://h/de", language: .de), WebhookSettings(name: "all", url: "http://h/all")]
        var engine = SignalEngine(settings: settings, dataset: Fixtures.october, stale: false)
        let start = engine.event(.start)
        let phone = LocationFix(device: "alice/phone", latitude: 48.137, longitude: 11.575, tst: 1_602_720_000, owntracks: true)
        let fix = engine.event(.fix(phone, place: Fixtures.muenchen, receivedAt: 1_602_720_000))
        let data = engine.followingReevaluation(engine.event(.data(Fixtures.november, stale: false))).actions
        return [start, fix, data]
    }

    /// Every announcement handed over after a journal write that names it, and before that
    /// write's witness; every witness handed over. Returns what failed.
    static func violations(_ entries: [Entry]) -> [String] {
        var problems: [String] = []
        // The journal writes naming each announcement topic, oldest first; each handed-over
        // announcement takes the oldest one (a topic may be announced again later).
        var journaled: [String: [(at: Int, witness: String?)]] = [:]
        // Each journal write by the id of its first announcement (the alert's), for its webhooks.
        var byAlertID: [UInt64: String?] = [:]
        for (index, entry) in entries.enumerated() {
            switch entry {
            case .notified(let webhook, let alertID):
                guard let witness = byAlertID[alertID] else {
                    problems.append("webhook \(webhook): alert \(alertID) queued without its decision journaled before it")
                    continue
                }
                if let witness, entries[..<index].contains(.handedOver(witness)) {
                    problems.append("webhook \(webhook): alert \(alertID) queued after its witness \(witness)")
                }
            case .journaled(_, let announced, let witness, let ids):
                if let first = ids.first { byAlertID[first] = witness }
                for topic in announced { journaled[topic, default: []].append((index, witness)) }
            case .handedOver(let message):
                let topic = String(message.prefix { $0 != " " })
                guard Self.isAnnouncement(topic) else { continue }
                guard let write = journaled[topic]?.first else {
                    problems.append("\(topic) handed over without its decision journaled before it")
                    continue
                }
                journaled[topic]?.removeFirst()
                guard let witness = write.witness else {
                    problems.append("\(topic) journaled without a witness")
                    continue
                }
                // The witness, byte for byte: a state retained before its alert would pass for
                // the alert's acknowledgement after a crash.
                if entries[..<index].contains(.handedOver(witness)) {
                    problems.append("\(topic): its witness \(witness) handed over before it")
                } else if !entries[index...].contains(.handedOver(witness)) {
                    problems.append("\(topic): its witness \(witness) never handed over after it")
                }
            }
        }
        return problems
    }

    @Test("each alert and transition goes out after its decision is journaled with it, and before its witness; the broker's acknowledgement reaches the journal")
    func order() throws {
        let log = Log()
        let journal = RecordingJournal(log)
        let executor = ActionExecutor(journal: journal, transport: RecordingTransport(log), webhooks: RecordingWebhooks(log),
                                      logger: Logger(label: "test"), now: { Date() })
        var others: [SignalEngine.Action] = []
        for batch in Self.actions() {
            executor.execute(batch) { others.append($0) }
        }
        let entries = log.all
        let announcements = entries.compactMap { entry -> String? in
            guard case .handedOver(let message) = entry else { return nil }
            let topic = String(message.prefix { $0 != " " })
            return Self.isAnnouncement(topic) ? topic : nil
        }
        // The phone's first alert and transition, its alert and transition for November, and
        // the districts that changed: enough to mean something.
        #expect(announcements.count >= 4 + 3, "\(announcements)")
        #expect(announcements.filter { $0 == "owntracks/alice/ampel/event" }.count == 2)
        let notified = entries.filter { if case .notified = $0 { true } else { false } }
        #expect(notified.count >= 4, "both webhooks for the phone's two alerts at least: \(notified.count)")
        #expect(Self.violations(entries) == [])
        #expect(journal.acknowledged.withLock { $0.count } == announcements.count, "every acknowledged announcement leaves the pending list")
        #expect(executor.tally.alerts + executor.tally.owntracksTransitions == announcements.count)
        #expect(!others.contains { if case .decide = $0 { true } else if case .publish = $0 { true } else { false } })
    }

    @Test("the check itself fails on a wrong order: an alert before its journal write, a witness before its alert")
    func checkCatchesWrongOrder() {
        let alert = "ampel/device/a/alert {}", state = "ampel/device/a/state {\"phase\":\"red\"}"
        #expect(Self.violations([.handedOver(alert), .journaled(key: "a", announced: ["ampel/device/a/alert"], witness: state), .handedOver(state)]).count == 1)
        #expect(Self.violations([.journaled(key: "a", announced: ["ampel/device/a/alert"], witness: state), .handedOver(state), .handedOver(alert)]).count == 1)
        #expect(Self.violations([.journaled(key: "a", announced: ["ampel/device/a/alert"], witness: state), .handedOver(alert)]).count == 1)
        #expect(Self.violations([.journaled(key: "a", announced: ["ampel/device/a/alert"], witness: state), .handedOver(alert), .handedOver(state)]).isEmpty)
        // A webhook body queued before its journal write, or after its witness.
        #expect(Self.violations([.notified(webhook: 0, alertID: 1), .journaled(key: "a", announced: ["ampel/device/a/alert"], witness: state, ids: [1]),
                                 .handedOver(alert), .handedOver(state)]).count == 1)
        #expect(Self.violations([.journaled(key: "a", announced: ["ampel/device/a/alert"], witness: state, ids: [1]), .handedOver(alert),
                                 .handedOver(state), .notified(webhook: 0, alertID: 1)]).count == 1)
        #expect(Self.violations([.journaled(key: "a", announced: ["ampel/device/a/alert"], witness: state, ids: [1]), .handedOver(alert),
                                 .notified(webhook: 0, alertID: 1), .handedOver(state)]).isEmpty)
    }

    /// The engine's tests read its actions as steps (`[SignalEngine.Action].steps`): what they
    /// say about order holds only while the steps are the order the executor carries out.
    /// An alert or an OwnTracks transition: journaled, acknowledged, witnessed. Not Home
    /// Assistant's copy of a device alert (`ampel/device/<key>/event`), which is none of these.
    static func isAnnouncement(_ topic: String) -> Bool {
        topic.hasSuffix("/alert") || (topic.hasPrefix("owntracks/") && topic.hasSuffix("/event"))
    }

    /// `message` (a topic, a space, a payload) without the `"id"` the executor puts first into an alert.
    static func unstamped(_ message: String) -> String {
        guard let start = message.range(of: #" {"id":""#),
              let end = message.range(of: #"","#, range: start.upperBound..<message.endIndex) else { return message }
        return message.replacingCharacters(in: start.lowerBound..<end.upperBound, with: " {")
    }

    @Test("the engine tests' steps are the executor's order: journal write, announcements, webhooks, retained publishes, witness")
    func stepsAreTheExecutorsOrder() {
        func described(_ step: ActionStep) -> String? {
            switch step {
            case .persist(let change): "journal " + RecordingJournal.key(change)
            case .publish(let message, _): "publish " + message.topic + " " + message.text
            case .notify(let webhook, _): "webhook \(webhook)"
            case .other: nil
            }
        }
        // The engine's alerts as the executor sends them, with the journal's id put in.
        var stamped = 0
        func described(_ entry: Entry) -> String {
            switch entry {
            case .journaled(let key, _, _, _): return "journal " + key
            case .handedOver(let message):
                let plain = Self.unstamped(message)
                if plain != message { stamped += 1 }
                return "publish " + plain
            case .notified(let webhook, _): return "webhook \(webhook)"
            }
        }
        for batch in Self.actions() {
            let log = Log()
            let executor = ActionExecutor(journal: RecordingJournal(log), transport: RecordingTransport(log), webhooks: RecordingWebhooks(log),
                                          alertIDs: AlertIDs(prefix: "run"), logger: Logger(label: "test"), now: { Date() })
            executor.execute(batch)
            let carriedOut = log.all.map(described)
            #expect(!carriedOut.isEmpty)
            #expect(batch.steps.compactMap(described) == carriedOut)
            let alerts = batch.steps.filter { if case .publish(_, let kind) = $0 { kind.isAlert || kind == .homeAssistantEvent } else { false } }
            #expect(stamped == alerts.count, "every alert (and its copy for Home Assistant) and only these carry an id")
            stamped = 0
        }
    }

    @Test("with the daemon's journal: what the broker has not acknowledged stays pending for the next start, with its witness")
    func pendingInTheRealJournal() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-executor-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = try Journal(directory: dir, continuing: JournalReplay.read(directory: dir, over: PersistedState()), logger: Logger(label: "test"))
        let executor = ActionExecutor(journal: journal, transport: RecordingTransport(Log(), silent: true), webhooks: Webhooks([], logger: Logger(label: "test")),
                                      logger: Logger(label: "test"), now: { Date() })
        let batches = Self.actions()
        for batch in batches { executor.execute(batch) }
        journal.sync()
        let replay = JournalReplay.read(directory: dir, over: PersistedState())
        var expected: [String: String] = [:]
        for case .decide(let decision) in batches.joined() {
            guard let announcement = decision.announcement else { continue }
            for message in announcement.messages { expected[message.message.topic + " " + message.message.text] = announcement.witness.message.topic }
        }
        let pending = Dictionary(replay.pendingAlerts.map { (Self.unstamped($0.message.topic + " " + $0.message.text), $0.witness?.topic ?? "none") }) { first, _ in first }
        #expect(!expected.isEmpty)
        #expect(pending == expected)
        #expect(replay.pendingAlerts.filter { $0.message.topic.hasSuffix("/alert") }.allSatisfy { $0.message.text.hasPrefix(#"{"id":""#) },
                "the journal holds each alert with its id, as it went out")
        #expect(replay.pendingAlerts.allSatisfy { $0.message.qos == .exactlyOnce }, "announcements go with QoS 2 by default")
        #expect(replay.state.devices["alice/phone"]?.phase == "darkred", "the decisions are in the journal too")
    }
}

extension ActionExecutorTests {
    @Test("a Home Assistant copy that waits for its delay is counted when queued, like every publish handed over")
    func delayedCopyIsCounted() throws {
        // The engine's batches with every Home Assistant copy delayed past the test's end.
        let batches = Self.actions().map { batch in
            batch.map { action -> SignalEngine.Action in
                guard case .decide(var decision) = action, decision.announcement?.homeAssistant != nil else { return action }
                decision.announcement?.homeAssistant?.delay = .seconds(600)
                return .decide(decision)
            }
        }
        let copies = batches.joined().filter { if case .decide(let decision) = $0 { decision.announcement?.homeAssistant != nil } else { false } }.count
        try #require(copies > 0)
        let log = Log()
        let executor = ActionExecutor(journal: RecordingJournal(log), transport: RecordingTransport(log), webhooks: RecordingWebhooks(log),
                                      logger: Logger(label: "test"), now: { Date() })
        for batch in batches { executor.execute(batch) }
        let handedOverCopies = log.all.filter { if case .handedOver(let message) = $0 { message.hasPrefix("ampel/device/") && message.contains("/event ") } else { false } }
        #expect(handedOverCopies.isEmpty, "the copies wait for their delay")
        #expect(executor.tally.byKind[.homeAssistantEvent] == copies)
        #expect(executor.tally.published == log.all.filter { if case .handedOver = $0 { true } else { false } }.count + copies)
    }
}
