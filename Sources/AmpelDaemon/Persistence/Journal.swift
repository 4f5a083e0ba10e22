import AmpelMessages
import AmpelMQTT
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// The daemon's write-ahead journal: every message taken from the broker, every decision of
/// the engine and every alert's fate, appended as it happens, so that `kill -9` at any moment
/// loses nothing that was acknowledged or decided (docs/DESIGN.md, decision 33).
///
/// Appends are copies into a memory-mapped segment file (`journal-<n>.log` in the state
/// directory): the page cache holds them the moment the copy ends, so a process that dies
/// keeps them; a thread of its own writes them to the disk every second (`fdatasync`), which
/// bounds what a power cut can take. The MQTT network thread appends each message inside
/// libmosquitto's message callback (2.0.11 has sent the PUBACK just before), the daemon's
/// loop appends its decisions before it hands their publishes over.
///
/// The snapshot (`state.json`) is rewritten only when the journal since the last one has
/// grown past the snapshot's own size (at least 64 MiB): each change costs a constant amount
/// of writing, whatever the number of devices. A snapshot names the segment it was taken at
/// (``JournalMark``); segments below it are removed once every message in them is handled.
final class Journal: Sendable {
    /// A new segment's size; a larger record gets a segment of its own size.
    static let segmentSize = 4 << 20
    /// The journal since the last snapshot may grow to the snapshot's size, and at least this.
    static let minimumSnapshotInterval = 64 << 20

    let directory: String
    let logger: Logger
    private let state: Mutex<WriterState>
    private let syncer: Syncer

    struct WriterState: @unchecked Sendable {
        var segment: Int
        var fd: Int32 = -1
        var base: UnsafeMutableRawPointer?
        var capacity = 0
        var used = 0
        var lastSeq: UInt64
        var lastAlertID: UInt64
        var handled: UInt64
        /// Alerts handed to the broker and not yet acknowledged, by id.
        var pending: [UInt64: (message: OutgoingMessage, witness: Witness?)]
        /// Every segment on disk (earlier runs' included), with its last input (0: none).
        var segments: [Int: UInt64]
        /// Segments below this one are covered by the snapshot on disk.
        var snapshotSegment: Int
        var bytesSinceSnapshot: Int
        /// Why the journal stopped writing (a disk that is full or gone); `nil` while it works,
        /// and again once a snapshot covers what it missed (``snapshotWritten(_:)``).
        var failure: String?
        /// Writes lost since ``failure``: their inputs and decisions live in memory only.
        var unwritten = 0
        var failedAt: ContinuousClock.Instant?
        /// The segment ``retry()`` opened after a failure (a snapshot begun after it covers the
        /// gap), and when the daemon was last asked for that snapshot.
        var reopened: (segment: Int, coverAskedAt: ContinuousClock.Instant)?
    }

    /// Told the failure when the journal stops writing and `nil` when it is safe again.
    private let failures: @Sendable (String?) -> Void

    /// Opens a new segment after the ones `replay` read (a run never appends to an old one).
    ///
    /// - Throws: ``StateStoreError`` when the first segment cannot be created.
    /// - Parameter failures: told why when the journal stops writing, and `nil` when it is safe again.
    init(directory: String, continuing replay: JournalReplay, logger: Logger,
                failures: @escaping @Sendable (String?) -> Void = { _ in }) throws(StateStoreError) {
        self.directory = directory
        self.logger = logger
        self.failures = failures
        var writer = WriterState(
            segment: replay.lastSegment, lastSeq: replay.lastSeq, lastAlertID: replay.lastAlertID, handled: replay.handled,
            pending: Dictionary(uniqueKeysWithValues: replay.pendingAlerts.map { ($0.id, ($0.message, $0.witness)) }),
            segments: replay.segments, snapshotSegment: replay.snapshotSegment, bytesSinceSnapshot: replay.bytesSinceSnapshot)
        syncer = Syncer(directory: directory, logger: logger)
        if let error = Self.roll(&writer, minimum: 0, syncer: syncer) {
            throw StateStoreError.noRoom(directory, needed: Self.segmentSize, error: error)
        }
        state = Mutex(writer)
    }

    deinit {
        state.withLock { Self.closeSegment(&$0, syncer: nil) }
        syncer.stop()
    }

    static func path(_ directory: String, segment: Int) -> String {
        directory + "/" + String(format: "journal-%08d.log", segment)
    }

    // MARK: Appending

    /// Records a message taken from the broker; returns its sequence number.
    func appendInput(_ message: MQTTMessage, receivedAt: Int) -> UInt64 {
        state.withLock { writer in
            writer.lastSeq += 1
            let seq = writer.lastSeq
            let record = JournalRecord.input(seq: seq, receivedAt: receivedAt, topic: message.topic, payload: message.payload,
                                             qos: UInt8(message.qos.rawValue), retain: message.retain)
            if append(record, &writer) { writer.segments[writer.segment] = seq }
            return seq
        }
    }

    /// Every input up to `seq` is handled (its decisions were appended before).
    func appendHandled(_ seq: UInt64) {
        state.withLock { writer in
            writer.handled = max(writer.handled, seq)
            _ = append(.handled(seq: seq), &writer)
        }
    }

    /// Records a device's or a district's new state.
    func append(_ change: SignalEngine.Change) {
        state.withLock { writer in _ = append(Self.record(change), &writer) }
    }

    /// Records a decision together with the alerts that announce it (the alert, and its
    /// OwnTracks transition): the alerts first, then the decision, in one segment and under one
    /// lock, so nothing comes between them. Alerts that end their segment are thus the trace of a
    /// process that died before their decision was written, and so before they were handed
    /// over: ``JournalReplay`` drops them and the next start decides (and announces) again.
    /// `finish` makes each message final once it has its id (the executor puts the id in an
    /// alert's payload): what is journaled is what goes out, now and at a resend after a restart.
    /// Returns the ids for ``acknowledge(_:)`` with the messages as finished, in the order given.
    func append(_ change: SignalEngine.Change, announcedBy messages: [OutgoingMessage], witness: Witness?,
                finish: (OutgoingMessage, UInt64) -> OutgoingMessage) -> [(id: UInt64, message: OutgoingMessage)] {
        state.withLock { writer in
            var alerts: [JournalRecord] = []
            var journaled: [(id: UInt64, message: OutgoingMessage)] = []
            for message in messages {
                writer.lastAlertID += 1
                let id = writer.lastAlertID
                let message = finish(message, id)
                writer.pending[id] = (message, witness)
                alerts.append(.alert(id: id, message: message, witness: witness))
                journaled.append((id, message))
            }
            let decision = Self.record(change)
            let size = (alerts + [decision]).reduce(0) { $0 + JournalRecord.headerSize + $1.bodySize }
            if reserve(size, &writer) {
                for alert in alerts { _ = append(alert, &writer) }
                _ = append(decision, &writer)
            }
            return journaled
        }
    }

    private static func record(_ change: SignalEngine.Change) -> JournalRecord {
        switch change {
        case .device(let key, let record): .device(key: key, record: record)
        case .district(let ags, let phase): .district(ags: ags, phase: phase)
        case .forgotten(let key): .forgotten(key: key)
        }
    }

    #if AMPEL_FAULT_INJECTION
    /// An alert without its decision: what a process killed between the two records of a pair
    /// leaves, for the tests of ``JournalReplay``. The daemon writes alerts only with their
    /// decision (``append(_:announcedBy:witness:)``).
    func appendAlert(_ message: OutgoingMessage, witness: Witness?) -> UInt64 {
        state.withLock { writer in
            writer.lastAlertID += 1
            let id = writer.lastAlertID
            writer.pending[id] = (message, witness)
            _ = append(.alert(id: id, message: message, witness: witness), &writer)
            return id
        }
    }
    #endif

    /// The broker took alert `id`: a restart will not send it again.
    func acknowledge(_ id: UInt64) {
        state.withLock { writer in
            guard writer.pending.removeValue(forKey: id) != nil else { return }
            _ = append(.alertAcknowledged(id: id), &writer)
        }
    }

    /// The broker refused alert `id`: it stays pending, without its witness, for the next start.
    func refuse(_ id: UInt64) {
        state.withLock { writer in
            guard let alert = writer.pending[id] else { return }
            writer.pending[id] = (alert.message, nil)
            _ = append(.alertRefused(id: id), &writer)
        }
    }

    /// The daemon stopped cleanly (its goodbye was acknowledged): the next start need not
    /// republish what the broker retains. Written to the disk before it returns.
    func appendStopped() {
        state.withLock { writer in _ = append(.stopped, &writer) }
        sync()
    }

    private func append(_ record: JournalRecord, _ writer: inout WriterState) -> Bool {
        let size = JournalRecord.headerSize + record.bodySize
        guard reserve(size, &writer), let base = writer.base else { return false }
        record.write(to: base + writer.used)
        writer.used += size
        writer.bytesSinceSnapshot += size
        return true
    }

    /// Makes room for `size` bytes in the current segment, opening the next one if needed;
    /// `false` when the journal cannot be written. After a failure only ``retry()`` tries the
    /// disk again: not every append, which on a full disk would be three system calls a message.
    private func reserve(_ size: Int, _ writer: inout WriterState) -> Bool {
        if writer.failure != nil, writer.reopened == nil {
            writer.unwritten += 1
            return false
        }
        if writer.base == nil || writer.used + size > writer.capacity {
            if let error = Self.roll(&writer, minimum: size, syncer: syncer) {
                fail(error, &writer)
                writer.unwritten += 1
                return false
            }
        }
        return true
    }

    private func fail(_ error: String, _ writer: inout WriterState) {
        writer.reopened = nil
        guard writer.failure == nil else { return }
        writer.failure = "the journal cannot be written: \(error)"
        writer.failedAt = .now
        writer.unwritten = 0
        // Said where it is read (`/readyz`, metrics) before it is logged: whoever reads the log
        // line finds it there.
        failures(writer.failure)
        logger.critical("the journal cannot be written: until it can, the messages taken from the broker and the decisions live in memory only, and a crash loses them (the broker will not send those messages again; their alerts may be lost or repeat). Retrying every second", metadata: [
            "error": "\(error)", "stateDir": "\(directory)",
        ])
    }

    /// Why the journal is not safe, or `nil` when it is.
    var failure: String? { state.withLock { $0.failure } }

    /// After a failure, tries the disk again; `true` when the caller should take a snapshot
    /// now: the journal writes again, and a snapshot of the state in memory covers what it
    /// missed (``snapshotWritten(_:)`` then says it is safe). Asks again every 10 s while no
    /// snapshot has covered it (one that could not be written).
    func retry() -> Bool {
        state.withLock { writer in
            guard writer.failure != nil else { return false }
            if let reopened = writer.reopened {
                guard ContinuousClock.now - reopened.coverAskedAt >= .seconds(10) else { return false }
                writer.reopened?.coverAskedAt = .now
                return true
            }
            guard Self.roll(&writer, minimum: 0, syncer: syncer) == nil else { return false }
            writer.reopened = (writer.segment, .now)
            return true
        }
    }

    // MARK: Segments

    /// Closes the current segment (cut to what it holds, handed to the syncer) and opens the next.
    private static func roll(_ writer: inout WriterState, minimum: Int, syncer: Syncer) -> String? {
        closeSegment(&writer, syncer: syncer)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let capacity = max(segmentSize, (minimum + page - 1) / page * page)
        let number = writer.segment + 1
        let path = Self.path(syncer.directory, segment: number)
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return "\(path): \(String(cString: strerror(errno)))" }
        // Reserved blocks, not a sparse file: a write into a mapped hole on a full disk would
        // kill the process with SIGBUS; here the failure is an error code.
        let reserved = posix_fallocate(fd, 0, off_t(capacity))
        guard reserved == 0 else {
            close(fd)
            unlink(path)
            return "\(path): cannot reserve \(capacity) bytes: \(String(cString: strerror(reserved)))"
        }
        let base = mmap(nil, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let base, base != MAP_FAILED else {
            let error = String(cString: strerror(errno))
            close(fd)
            unlink(path)
            return "\(path): cannot map: \(error)"
        }
        writer.segment = number
        writer.segments[number] = 0
        writer.fd = fd
        writer.base = base
        writer.capacity = capacity
        writer.used = 0
        syncer.opened(fd: fd)
        return nil
    }

    private static func closeSegment(_ writer: inout WriterState, syncer: Syncer?) {
        guard let base = writer.base else { return }
        munmap(base, writer.capacity)
        _ = ftruncate(writer.fd, off_t(writer.used))
        if let syncer { syncer.closed(fd: writer.fd) } else { _ = fdatasync(writer.fd); close(writer.fd) }
        writer.base = nil
        writer.fd = -1
    }

    /// Writes everything appended so far to the disk (and the directory entries of new segments).
    func sync() {
        let fd = state.withLock { dup($0.fd) }
        syncer.syncNow(current: fd)
        if fd >= 0 { close(fd) }
    }

    // MARK: Snapshots

    /// Whether the journal since the last snapshot has outgrown a snapshot of `snapshotBytes`.
    func wantsSnapshot(snapshotBytes: Int) -> Bool {
        state.withLock { $0.bytesSinceSnapshot >= max(Self.minimumSnapshotInterval, snapshotBytes) }
    }

    /// Starts a snapshot: opens a new segment and returns the mark that the state copied now
    /// (on the daemon's loop, before it handles anything else) goes with.
    func beginSnapshot() -> JournalMark {
        state.withLock { writer in
            // A journal that failed tries the disk in ``retry()`` only; an empty segment (the one
            // ``retry()`` just opened) can be the mark itself.
            let empty = writer.base != nil && writer.used == 0
            if writer.failure == nil || writer.reopened != nil, !empty, let error = Self.roll(&writer, minimum: 0, syncer: syncer) {
                fail(error, &writer)
            }
            writer.bytesSinceSnapshot = 0
            return JournalMark(
                segment: writer.segment, handled: writer.handled, lastSeq: writer.lastSeq, lastAlertID: writer.lastAlertID,
                pendingAlerts: writer.pending.sorted { $0.key < $1.key }.map {
                    PendingAlert(id: $0.key, message: $0.value.message, witness: $0.value.witness)
                })
        }
    }

    /// The snapshot taken at `mark` is on disk: segments below it may go once their messages are handled.
    func snapshotWritten(_ mark: JournalMark) {
        let recovered: (unwritten: Int, failedFor: Duration)? = state.withLock { writer in
            writer.snapshotSegment = max(writer.snapshotSegment, mark.segment)
            guard writer.failure != nil, let reopened = writer.reopened, mark.segment >= reopened.segment else { return nil }
            defer { (writer.failure, writer.reopened) = (nil, nil) }
            return (writer.unwritten, writer.failedAt.map { .now - $0 } ?? .zero)
        }
        if let recovered {
            failures(nil)
            logger.notice("the journal is safe again: it writes, and the snapshot covers what it could not write", metadata: [
                "unwritten": "\(recovered.unwritten)", "failedFor": "\(recovered.failedFor)", "stateDir": "\(directory)",
            ])
        }
        removeCovered()
    }

    /// Removes the segments that the snapshot covers and whose every message is handled.
    func removeCovered() {
        let removable: [Int] = state.withLock { writer in
            let covered = writer.segments.filter { $0.key < writer.snapshotSegment && $0.value <= writer.handled }.map(\.key)
            for number in covered { writer.segments[number] = nil }
            return covered
        }
        for number in removable { unlink(Self.path(directory, segment: number)) }
    }

    /// The segment numbers present in `directory`, in order.
    static func segmentNumbers(in directory: String) -> [Int] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name -> Int? in
            guard name.hasPrefix("journal-"), name.hasSuffix(".log") else { return nil }
            return Int(name.dropFirst("journal-".count).dropLast(".log".count))
        }.sorted()
    }

    // MARK: Writing to the disk

    /// A thread that writes the journal to the disk every second: the appends stay copies.
    final class Syncer: Sendable {
        let directory: String
        let logger: Logger
        private let shared = Mutex<(closed: [Int32], current: Int32, newFiles: Bool, stop: Bool)>(([], -1, false, false))
        private let wake = DispatchSemaphore(value: 0)
        private let done = DispatchSemaphore(value: 0)

        init(directory: String, logger: Logger) {
            self.directory = directory
            self.logger = logger
            let thread = Thread { [self] in run() }
            thread.name = "ampel-journal"
            thread.start()
        }

        func opened(fd: Int32) {
            shared.withLock { shared in
                if shared.current >= 0 { close(shared.current) }
                shared.current = dup(fd)
                shared.newFiles = true
            }
        }

        /// A rolled segment: written out and closed by this thread.
        func closed(fd: Int32) {
            shared.withLock { $0.closed.append(fd) }
        }

        func stop() {
            shared.withLock { $0.stop = true }
            wake.signal()
            done.wait()
        }

        func syncNow(current: Int32) {
            flush()
            if current >= 0 { _ = fdatasync(current) }
        }

        private func run() {
            while true {
                _ = wake.wait(timeout: .now() + .seconds(1))
                flush()
                if shared.withLock({ $0.stop }) {
                    shared.withLock { if $0.current >= 0 { close($0.current); $0.current = -1 } }
                    done.signal()
                    return
                }
            }
        }

        private func flush() {
            let (closed, current, newFiles) = shared.withLock { shared in
                defer { shared.closed = []; shared.newFiles = false }
                return (shared.closed, shared.current >= 0 ? dup(shared.current) : -1, shared.newFiles)
            }
            for fd in closed {
                _ = fdatasync(fd)
                close(fd)
            }
            if current >= 0 {
                _ = fdatasync(current)
                close(current)
            }
            if newFiles {
                let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                if fd >= 0 { _ = fsync(fd); close(fd) }
            }
        }
    }
}
