import AmpelData
import AmpelDomain
import Foundation

/// `ampel/bridge/state`: `{"state":"online"}`, and the Will `{"state":"offline"}`.
enum BridgeState {
    static let online = #"{"state":"online"}"#
    static let offline = #"{"state":"offline"}"#
}

/// `ampel/bridge/info`: what the daemon runs on and how it fares.
struct BridgeInfo: Sendable, Hashable {
    /// The broker (`host:port`) of the daemon's connection: with a list of cluster nodes, the
    /// one in use. `null` before the first connection.
    var broker: String?
    var version: String
    var ruleSet: String
    var source: String
    var dataDate: String
    /// What the data in force is: `live`, `stand-in` (bundled data while a live source has
    /// not answered), `snapshot`, `history` or `replay` (``DataKind``).
    var dataKind: String
    /// ISO 8601 time of the last fetch attempt, `null` before the first.
    var lastFetch: String?
    /// The most pressing problem: the journal's (``journalError``) while it cannot be written,
    /// else the data source's last error; `null` when there is none.
    var lastError: String?
    /// Why the journal cannot be written (a full or lost state disk); `null` while it is safe.
    var journalError: String?
    /// ISO 8601 time the live source was last asked (a `304` too); `null` for fixed data.
    var lastCheck: String?
    /// Why the newest publication is held back as a possible wrong release; `null` when none is.
    var held: String?
    var stale: Bool
    var devices: Int
    var counters: Counters
    /// Set when the state was lost at start (the state file could not be read and was moved
    /// aside, or it is missing while the journal continues from it), with what was rebuilt
    /// from the broker's retained states. `null` otherwise.
    var stateRecovered: StateRecovery?

    init(broker: String? = nil, version: String, ruleSet: String, source: String, dataDate: String, dataKind: String = "snapshot",
                lastFetch: String?, lastError: String?,
                lastCheck: String? = nil, held: String? = nil, stale: Bool, devices: Int, counters: Counters,
                stateRecovered: StateRecovery? = nil, journalError: String? = nil) {
        self.stateRecovered = stateRecovered
        self.journalError = journalError
        self.broker = broker
        self.version = version
        self.ruleSet = ruleSet
        self.source = source
        self.dataDate = dataDate
        self.dataKind = dataKind
        self.lastFetch = lastFetch
        self.lastError = journalError ?? lastError
        self.stale = stale
        self.lastCheck = lastCheck
        self.held = held
        self.devices = devices
        self.counters = counters
    }

    /// The payload: compact JSON, keys sorted, every key present (`null` where unknown).
    func json() -> [UInt8] {
        var json = JSONWriter(capacity: 512)
        json.raw(#"{"broker":"#)
        json.string(broker)
        json.raw(#","counters":"#)
        counters.write(to: &json)
        json.raw(#","dataDate":"#)
        json.string(dataDate)
        json.raw(#","dataKind":"#)
        json.string(dataKind)
        json.raw(#","devices":"#)
        json.number(devices)
        json.raw(#","held":"#)
        json.string(held)
        json.raw(#","journalError":"#)
        json.string(journalError)
        json.raw(#","lastCheck":"#)
        json.string(lastCheck)
        json.raw(#","lastError":"#)
        json.string(lastError)
        json.raw(#","lastFetch":"#)
        json.string(lastFetch)
        json.raw(#","ruleSet":"#)
        json.string(ruleSet)
        json.raw(#","source":"#)
        json.string(source)
        json.raw(#","stale":"#)
        json.bool(stale)
        json.raw(#","stateRecovered":"#)
        if let stateRecovered {
            json.raw(#"{"at":"#)
            json.string(stateRecovered.at)
            json.raw(#","movedTo":"#)
            json.string(stateRecovered.movedTo)
            json.raw(#","reason":"#)
            json.string(stateRecovered.reason)
            json.raw(#","rebuilt":"#)
            json.optional(stateRecovered.rebuilt) { $1.write(to: &$0) }
            json.raw("}")
        } else {
            json.raw("null")
        }
        json.raw(#","version":"#)
        json.string(version)
        json.raw("}")
        return json.bytes
    }
}

extension StateRebuild {
    /// `{"complete","devices","districts","expectedDevices","known","skipped"}`.
    func write(to json: inout JSONWriter) {
        json.raw(#"{"complete":"#)
        json.bool(complete)
        json.raw(#","devices":"#)
        json.number(devices)
        json.raw(#","districts":"#)
        json.number(districts)
        json.raw(#","expectedDevices":"#)
        json.optional(expectedDevices) { $0.number($1) }
        json.raw(#","known":"#)
        json.number(known)
        json.raw(#","skipped":"#)
        json.number(skipped)
        json.raw("}")
    }
}

/// What the daemon has seen, by kind: the numbers in `ampel/bridge/info`.
struct Counters: Sendable, Hashable {
    /// Fixes accepted, by input kind.
    var accepted: [String: Int] = [:]
    /// Messages skipped by type (OwnTracks `lwt`, `transition`, …).
    var skipped: [String: Int] = [:]
    /// Bad payloads, by ``DropReason``.
    var dropped: [String: Int] = [:]
    var alerts = 0
    /// Device phase changes that sent no alert, by ``AlertSuppression`` (`old-fix`, `dwell`).
    var alertsSuppressed: [String: Int] = [:]
    var published = 0
    var publishFailures = 0
    /// Publishes the broker refused (a reason code of 0x80 or above), by reason name and topic
    /// class: `{"notAuthorized": {"alert": 1, "state": 1}}` (``PublishRefusals``). ``published``
    /// counts hand-overs to the client, refused ones too: a refused alert stays pending in the
    /// journal, and what reached the broker is `published` less `refused`.
    var refused: [String: [String: Int]] = [:]
    var datasetsApplied = 0
    var datasetsRejected = 0
    /// What the live source's data layer counted (`dataNotModified`, `dataRevisions`, ...); zero for fixed data.
    var data = DataCounters()
    /// Broker connections regained after the first (each one republishes every retained topic).
    var reconnects = 0
    /// Reconnects that went to another broker of the list than the connection before (also in
    /// ``reconnects``).
    var failovers = 0
    /// Publishes that repeated retained topics and lamp colours after a reconnect (also in `published`).
    var republished = 0
    /// Alerts decided before a crash that the broker had not acknowledged, sent again at start.
    var alertsResent = 0
    /// Times the intake queue was full and the daemon stopped reading from the broker.
    var intakePaused = 0
    /// Times the broker had not acknowledged ``DaemonLimits/outgoing`` publishes and the
    /// daemon waited for it before handling the next message.
    var outgoingWaits = 0
    /// Location messages whose `lang` was ignored (not a string, not valid UTF-8, or no
    /// language Ampel speaks); the fix itself was used.
    var invalidLang = 0
    /// Each webhook's deliveries, by its name (`notify.webhooks`).
    var webhooks: [String: WebhookCounters] = [:]
    /// Device alerts also sent to OwnTracks apps as transitions (`notify.owntracks`); not in ``alerts``.
    var owntracksTransitions = 0
    /// Devices forgotten after `devices.forget_after` without a fix (their retained topics cleared).
    var forgotten = 0

    init() {}

    var droppedTotal: Int { dropped.values.reduce(0, +) }
    var acceptedTotal: Int { accepted.values.reduce(0, +) }

    /// `{"accepted":{…},"alerts":…}`, keys sorted (the counted names are ASCII, so byte order is name order).
    func write(to json: inout JSONWriter) {
        func table(_ counts: [String: Int]) { Self.table(counts, to: &json) }
        json.raw(#"{"accepted":"#)
        table(accepted)
        json.raw(#","alerts":"#)
        json.number(alerts)
        json.raw(#","alertsResent":"#)
        json.number(alertsResent)
        json.raw(#","alertsSuppressed":"#)
        table(alertsSuppressed)
        // The data layer's counts: `dataX` sorts before `datasets…` (an upper-case letter is below `s`).
        Self.write(data, to: &json)
        json.raw(#","datasetsApplied":"#)
        json.number(datasetsApplied)
        json.raw(#","datasetsRejected":"#)
        json.number(datasetsRejected)
        json.raw(#","dropped":"#)
        table(dropped)
        json.raw(#","failovers":"#)
        json.number(failovers)
        json.raw(#","forgotten":"#)
        json.number(forgotten)
        json.raw(#","intakePaused":"#)
        json.number(intakePaused)
        json.raw(#","invalidLang":"#)
        json.number(invalidLang)
        json.raw(#","outgoingWaits":"#)
        json.number(outgoingWaits)
        json.raw(#","owntracksTransitions":"#)
        json.number(owntracksTransitions)
        json.raw(#","publishFailures":"#)
        json.number(publishFailures)
        json.raw(#","published":"#)
        json.number(published)
        json.raw(#","reconnects":"#)
        json.number(reconnects)
        json.raw(#","refused":{"#)
        for (index, reason) in refused.keys.sorted().enumerated() {
            if index > 0 { json.raw(",") }
            json.string(reason)
            json.raw(":")
            table(refused[reason] ?? [:])
        }
        json.raw("}")
        json.raw(#","republished":"#)
        json.number(republished)
        json.raw(#","skipped":"#)
        table(skipped)
        json.raw(#","webhooks":{"#)
        for (index, name) in webhooks.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
            if index > 0 { json.raw(",") }
            json.string(name)
            json.raw(":")
            webhooks[name]?.write(to: &json)
        }
        json.raw("}}")
    }

    /// `{"a":1,"b":2}`, keys sorted.
    static func table(_ counts: [String: Int], to json: inout JSONWriter) {
        json.raw("{")
        for (index, key) in counts.keys.sorted().enumerated() {
            if index > 0 { json.raw(",") }
            json.string(key)
            json.raw(":")
            json.number(counts[key] ?? 0)
        }
        json.raw("}")
    }

    /// The data layer's counters as `"dataChecks":…` to `"dataUpdates":…`, each after a comma.
    static func write(_ data: DataCounters, to json: inout JSONWriter) {
        json.raw(#","dataChecks":"#)
        json.number(data.checks)
        json.raw(#","dataCorrections":"#)
        json.number(data.corrections)
        json.raw(#","dataHeld":"#)
        json.number(data.held)
        json.raw(#","dataNotModified":"#)
        json.number(data.notModified)
        json.raw(#","dataRevisions":"#)
        json.number(data.revisions)
        json.raw(#","dataSkippedRows":"#)
        json.number(data.skippedRows)
        json.raw(#","dataUnchanged":"#)
        json.number(data.unchanged)
        json.raw(#","dataUpdates":"#)
        json.number(data.updates)
    }
}

/// One webhook's deliveries: `counters.webhooks.<name>` in `bridge/info`.
struct WebhookCounters: Sendable, Hashable {
    /// Alerts the endpoint answered with 2xx.
    var delivered = 0
    /// POSTs that failed (each retry counts).
    var failedAttempts = 0
    /// Alerts dropped because the webhook's queue was full.
    var droppedQueueFull = 0
    /// Alerts given up: a 4xx other than 408/429, or the last retry failed.
    var droppedGaveUp = 0
    /// Alerts waiting now (the one in flight not included).
    var queued = 0

    init() {}

    /// `{"delivered","dropped":{"gaveUp","queueFull"},"failedAttempts","queued"}`.
    func write(to json: inout JSONWriter) {
        json.raw(#"{"delivered":"#)
        json.number(delivered)
        json.raw(#","dropped":{"gaveUp":"#)
        json.number(droppedGaveUp)
        json.raw(#","queueFull":"#)
        json.number(droppedQueueFull)
        json.raw(#"},"failedAttempts":"#)
        json.number(failedAttempts)
        json.raw(#","queued":"#)
        json.number(queued)
        json.raw("}")
    }
}
