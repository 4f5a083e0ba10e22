import CAmpelLinux
import Logging
import Foundation
import Synchronization

/// The client's network thread: connects, runs the read/write/keep-alive steps, waits out the
/// reconnect backoff, and reports to ``MQTTSession`` what happened on the connection.
///
/// libmosquitto's own `mosquitto_loop_start` is not used: its reconnect path re-sends the
/// CONNECT without our MQTT 5 session-expiry property, and `mosquitto_connect_async` has no
/// MQTT 5 variant. This thread calls the blocking connect each time instead.
///
/// libmosquitto's callbacks arrive on this thread, inside the loop steps, at the session, which
/// passes the connection's to this loop; they only copy and record (``ConnectionRecord``, the
/// answer batch). What they report is acted on between loop steps, never inside a callback.
final class NetworkLoop: @unchecked Sendable {
    /// What the callbacks noted about the current connection.
    struct ConnectionRecord {
        var connack: (reason: Int32, sessionPresent: Bool)?
        var disconnectReason: Int32?
        /// Last warning/error libmosquitto logged, to explain TLS and socket failures.
        var lastLogError: String?
    }

    let mosquitto: MosquittoClient
    let configuration: MQTTConfiguration
    /// Runs, between the loop steps of a connection, the consumer jobs that this thread resumed.
    let executor = NetworkThreadExecutor()

    let record = Mutex(ConnectionRecord())
    /// Answers read but not yet handed over, for ``deliverAnswers(_:_:)``. Only this thread
    /// touches it (the lock is never contended).
    let answers = Mutex<[(mid: Int32, result: AckResult)]>([])
    /// Set by `disconnect()`; read once per loop step.
    let stopRequested = Atomic<Bool>(false)
    /// Set with ``stopRequested`` when the stop is to drop the connection without DISCONNECT.
    let abortRequested = Atomic<Bool>(false)
    /// Cleared by ``setReading(_:)``: the loop then neither polls for nor reads incoming data.
    let reading = Atomic<Bool>(true)
    /// Whether this thread is in, or about to enter, `poll` and needs a wake-up to notice a
    /// packet queued by another thread.
    let idle = Atomic<Bool>(false)
    /// The wake-up descriptor (eventfd).
    let wakeReadFD: Int32
    let wakeWriteFD: Int32
    /// Cuts a reconnect backoff short when the client stops.
    let backoffWakeup = DispatchSemaphore(value: 0)
    /// This thread saw the stop request and sent DISCONNECT (only this thread touches it).
    private var stopNoticed = false
    /// The current connection's CONNACK accepted it and the session knows (only this thread).
    private var established = false
    /// The current connection's socket takes TCP_CORK (only this thread; see ``loopOnce``).
    private var corkable = true
    /// Publish notes that may be QoS 0 written-notes, told apart once per loop step
    /// (``MQTTSession/publishesDone(mids:)``; only this thread touches it).
    private var undecidedNotes: [Int32] = []
    /// MQTT 5 publishes answered in this loop step, with their reason code: the session lets
    /// their topics go and names those refused (0x80 or above).
    private var answeredV5: [(mid: Int32, reason: Int32)] = []

    /// See ``loopOnce(timeoutMilliseconds:_:_:)``.
    static let answerBatch = 64
    /// The most `mosquitto_loop_read` calls of one loop step, before its jobs run and its
    /// write goes out.
    static let readsPerStep = 256
    /// How long a stopping connection may take to write its DISCONNECT.
    static let disconnectGrace: Duration = .seconds(2)
    /// How long the broker may take to close its side, counted from the end of the
    /// DISCONNECT's grace (``disconnectGrace``).
    static let lingerLimit: Duration = .seconds(1)

    /// Ends a connection after a clean DISCONNECT the way TCP expects: the write side is shut
    /// (FIN after the DISCONNECT), what the broker still sends is read and thrown away until it
    /// closes its side (or `deadline`), and only then is the socket closed.
    ///
    /// libmosquitto closes the socket as soon as it has written the DISCONNECT. Bytes the broker
    /// sent meanwhile (the next QoS 1 messages of a busy subscription) are then unread, and Linux
    /// answers a close with unread bytes with a reset: the broker, whose write fails first, drops
    /// the connection without reading the last PUBACKs and the DISCONNECT, publishes the Last
    /// Will and delivers those messages again to the next session, which had them already.
    /// `socket` is a duplicate taken before the DISCONNECT, so libmosquitto's close does not end
    /// the connection. What is thrown away here was never acknowledged: the broker keeps it
    /// for the session.
    static func closeAfterBroker(_ socket: Int32, before deadline: ContinuousClock.Instant) {
        defer { close(socket) }
        _ = shutdown(socket, Int32(SHUT_WR))
        var scratch = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let left = deadline - .now
            guard left > .zero else { return }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = Glibc.poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return }
            let count = scratch.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            // 0: the broker closed its side; < 0: the connection is gone either way.
            guard count > 0 else { return }
        }
    }

    init(mosquitto: MosquittoClient, configuration: MQTTConfiguration) {
        self.mosquitto = mosquitto
        self.configuration = configuration
        var writeFD: Int32 = -1
        wakeReadFD = ampel_wake_create(&writeFD)
        wakeWriteFD = writeFD
    }

    deinit {
        if wakeReadFD >= 0 { ampel_wake_close(wakeReadFD, wakeWriteFD) }
    }

    var setupError: MQTTError? {
        wakeReadFD < 0
            ? MQTTError(code: .system, message: "cannot create the MQTT network thread's wake-up descriptor: \(String(cString: strerror(errno)))")
            : nil
    }

    /// Starts the thread for `session`, the one that owns this loop: the thread holds it until
    /// it exits, and reports to it what happened on the connection.
    func start(for session: MQTTSession) {
        let name = "mqtt-" + String(decoding: configuration.clientID.utf8.prefix(10), as: UTF8.self)
        let thread = Thread { [self] in
            ampel_thread_set_name(name)
            self.applySchedulingPolicy(session.logger)
            self.run(session)
        }
        thread.start()
    }

    /// Asks the thread to stop: it sends DISCONNECT if connected (or, with `sendDisconnect`
    /// false, drops the connection so that the broker publishes the Last Will), ends its
    /// backoff, and exits.
    func requestStop(sendDisconnect: Bool = true) {
        if !sendDisconnect { abortRequested.store(true, ordering: .sequentiallyConsistent) }
        stopRequested.store(true, ordering: .sequentiallyConsistent)
        backoffWakeup.signal()
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        if idle.load(ordering: .relaxed) { ampel_wake_signal(wakeWriteFD) }
    }

    /// Starts or stops reading from the socket (see ``MQTTClient/pauseReading()``); a resume
    /// wakes the thread, which may sleep without watching the socket.
    func setReading(_ enabled: Bool) {
        reading.store(enabled, ordering: .sequentiallyConsistent)
        if enabled {
            atomicMemoryFence(ordering: .sequentiallyConsistent)
            if idle.load(ordering: .relaxed) { ampel_wake_signal(wakeWriteFD) }
        } else if executor.isHost {
            // Paused on the network thread: from a message handler, inside `mosquitto_loop_read`,
            // errno is what ends its loop after this packet (it reads on while QoS 1/2 messages
            // wait in its queues); from a job between reads, `loopRead` clears it again.
            errno = EAGAIN
        }
    }

    /// Puts this thread in the configured scheduling class.
    ///
    /// `.batch` (SCHED_BATCH on Linux): a wake-up of this thread no longer preempts the thread
    /// that caused it. Without it, a publisher that queues a packet while this thread sleeps
    /// wakes it, and on a busy machine the woken thread takes the publisher's CPU at once
    /// (docs/mqtt-client.md has the measurement). A woken batch thread still runs at once on an
    /// idle CPU, and otherwise at the next tick or when the running thread blocks.
    private func applySchedulingPolicy(_ logger: Logger) {
        guard configuration.networkThreadPolicy == .batch else { return }
        if ampel_thread_use_batch_class() != 0 {
            logger.debug(
                "MQTT network thread stays in the normal scheduling class", metadata: ["error": "\(String(cString: strerror(errno)))"])
        }
    }

    private func run(_ session: MQTTSession) {
        // Each session starts with the first broker of the list; the state machine names the next.
        var broker = configuration.endpoints[0]
        while !stopRequested.load(ordering: .sequentiallyConsistent) {
            let error = runOneConnection(to: broker, session)
            guard let (delay, next) = session.connectionEnded(error) else { break }
            broker = next
            let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
            _ = backoffWakeup.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds)))
        }
        session.networkThreadExited()
    }

    // MARK: - One connection

    /// One TCP/TLS connection from connect to loss. Returns why it ended.
    private func runOneConnection(to broker: MQTTConfiguration.Endpoint, _ session: MQTTSession) -> MQTTError {
        record.withLock { $0 = ConnectionRecord() }
        established = false
        corkable = true
        mosquitto.setLogCallback(enabled: true)
        let (rc, connectErrno) = mosquitto.connect(host: broker.host, port: broker.port, keepAlive: configuration.keepAlive)
        guard rc == MosquittoResult.success else {
            return MosquittoClient.connectError(
                rc, errno: connectErrno, host: broker.host, port: broker.port,
                logLine: record.withLock { $0.lastLogError })
        }
        // libmosquitto reads each packet in several small reads; on this thread they take what
        // one recv brought in (`ampel_read_ahead_attach`). Attached before the first read of
        // this connection, detached before the next connect, which may get the same descriptor.
        if ampel_read_ahead_attach(mosquitto.socket) != 0 {
            session.logger.debug("MQTT socket read-ahead unavailable; reading packet by packet")
        }
        defer { ampel_read_ahead_detach() }
        var loopRC = MosquittoResult.success
        var stopDeadline: ContinuousClock.Instant?
        // A second descriptor of the socket, kept across the clean DISCONNECT (see
        // ``closeAfterBroker(_:before:)``).
        var kept: Int32 = -1
        defer { if kept >= 0 { Self.closeAfterBroker(kept, before: (stopDeadline ?? .now) + Self.lingerLimit) } }
        var spare: [(mid: Int32, result: AckResult)] = []
        executor.startHosting()
        defer {
            decideNotes(session)
            deliverAnswers(&spare, session)
            // What the last answers resumed, and what waits, runs on the global executor
            // while this thread reconnects or exits.
            executor.stopHosting()
        }
        while loopRC == MosquittoResult.success {
            loopRC = loopOnce(timeoutMilliseconds: 1000, &spare, session)
            // libmosquitto closed the socket: its number may be the next descriptor this
            // thread opens (the stop's linger reads a duplicate).
            if mosquitto.socket < 0 { ampel_read_ahead_detach() }
            // loopOnce notes it after its read; this covers a step that read the CONNACK and
            // then ended early.
            noteEstablished(session)
            if stopRequested.load(ordering: .relaxed) {
                let now = ContinuousClock.now
                if stopDeadline == nil {
                    stopNoticed = true
                    stopDeadline = now + Self.disconnectGrace
                    if abortRequested.load(ordering: .sequentiallyConsistent) {
                        mosquitto.abortConnection()
                    } else {
                        let socket = mosquitto.socket
                        if socket >= 0 { kept = dup(socket) }
                        mosquitto.disconnect()
                    }
                }
                if let stopDeadline, now > stopDeadline { break }
            }
        }
        let ended = record.withLock { $0 }
        if let connack = ended.connack, connack.reason != 0 {
            return MQTTError(
                code: .connectionRefused, reasonCode: Int(connack.reason),
                message: "connection refused by broker \(broker): \(mosquitto.connackText(connack.reason))")
        }
        if stopRequested.load(ordering: .relaxed) { return SessionErrors.requestedDisconnect }
        var message = "connection to \(broker) ended: \(MosquittoLibrary.describe(loopRC))"
        if let reason = ended.disconnectReason, configuration.protocolVersion == .v5, reason >= 0x80 {
            message += " (broker: \(MosquittoLibrary.describeReason(reason)))"
        }
        if let line = ended.lastLogError { message += " (\(line))" }
        let code = loopRC == MosquittoResult.success ? MQTTError.Code.connectionLost : MQTTError.Code(rawValue: loopRC)
        return MQTTError(code: code, reasonCode: ended.disconnectReason.map(Int.init), message: message)
    }

    /// One iteration: what `mosquitto_loop(mosq, timeout, 1)` does, with our own wake-up.
    ///
    /// libmosquitto writes a byte into an internal socket pair for every packet any thread
    /// queues, and `mosquitto_loop` selects on it and reads back one byte per iteration. Under
    /// load that pair never empties, so its network thread spins through `select` without ever
    /// sleeping, and every byte written while it does sleep costs the publisher a kernel
    /// wake-up. Our handle has no pair (``MosquittoClient``); the thread
    /// polls the socket and an eventfd that publishers signal only when it is idle
    /// (``wakeIfIdle()``), drains every wake-up at once, and then does the same read, write and
    /// keep-alive steps as `mosquitto_loop`, through the same public calls, which also handle TLS.
    ///
    /// The idle flag is raised before the last look at the outgoing queue; a publisher queues
    /// first and then reads the flag, both with a full fence between, so either this thread
    /// sees the packet (and polls for writing) or the publisher sees the flag (and wakes it).
    ///
    /// Acknowledgements read here are handed to their waiting tasks in batches: when
    /// ``answerBatch`` have come together, and whenever nothing more is ready to read or write,
    /// before the thread sleeps. Resuming a task wakes a sleeping pool thread (a futex call on
    /// each side); one wake-up then serves the whole batch, while a lone publish still gets its
    /// answer without delay. A task on ``executor`` wakes no thread: its jobs, queued by this
    /// thread's reads and answers, run after the read, before the write that sends what they
    /// publish.
    private func loopOnce(timeoutMilliseconds: Int32, _ spare: inout [(mid: Int32, result: AckResult)], _ session: MQTTSession) -> Int32 {
        defer { decideNotes(session) }
        let socket = mosquitto.socket
        guard socket >= 0 else { return MosquittoResult.noConnection }
        var readable: Int32 = 0
        var count: Int32
        if answers.withLock({ !$0.isEmpty }) || executor.hasQueued {
            // Answers or jobs are waiting: hand them over and run them now unless there is
            // more to read or write.
            count = poll(socket, timeoutMilliseconds: 0, &readable)
            if count == 0 {
                deliverAnswers(&spare, session)
                executor.runQueued()
                count = poll(socket, timeoutMilliseconds: executor.hasQueued ? 0 : timeoutMilliseconds, &readable)
            }
        } else {
            count = poll(socket, timeoutMilliseconds: timeoutMilliseconds, &readable)
        }
        if count < 0 {
            return errno == EINTR ? MosquittoResult.success : MosquittoResult.errno
        }
        if readable != 0 {
            // `mosquitto_loop_read` reads no more packets than QoS 1/2 messages wait in its
            // queues (one, at QoS 0) and stops whenever errno says EAGAIN. It is called again
            // while bytes read ahead wait, up to ``readsPerStep`` times, so that the jobs of what
            // arrived run before the write, which sends their publishes together. A pause of
            // reading (the intake is full) ends it at once.
            var reads = 0
            repeat {
                let rc = mosquitto.loopRead()
                if rc != MosquittoResult.success || mosquitto.socket < 0 { return rc }
                if answers.withLock({ $0.count }) >= Self.answerBatch { deliverAnswers(&spare, session) }
                reads += 1
            } while reads < Self.readsPerStep && ampel_read_ahead_pending(socket) != 0 && reading.load(ordering: .relaxed)
        }
        // The consumer jobs that the messages and answers resumed: what they publish goes out
        // with the write below. A CONNACK read with the first messages is taken first, so they
        // publish on an established connection.
        noteEstablished(session)
        executor.runQueued()
        // Whatever is queued now (by other threads while this one polled, or by the read above:
        // PUBACKs, the next messages the send maximum lets out) goes out; a full socket buffer
        // keeps the rest for the next iteration.
        if mosquitto.wantsWrite {
            // libmosquitto writes each packet with its own system call; corked, the kernel
            // sends what one step writes (a fix's PUBACK and its state, a batch of publishes)
            // in full segments when the cork comes off, instead of one segment per packet. Not
            // once the stop is noticed: libmosquitto closes its descriptor inside the write that
            // sends the DISCONNECT, and the cork would stay on the duplicate that lingers.
            var corked = false
            if corkable && !stopNoticed {
                corked = ampel_tcp_cork(socket, 1) == 0
                corkable = corked
            }
            let rc = mosquitto.loopWrite()
            if corked && mosquitto.socket == socket { _ = ampel_tcp_cork(socket, 0) }
            if rc != MosquittoResult.success || mosquitto.socket < 0 { return rc }
        }
        return mosquitto.loopMisc()
    }

    /// Waits for the socket (readable; writable too if a packet is queued) or a wake-up. A wait
    /// that may block raises the idle flag first and takes the last look at the outgoing queue
    /// after it, so that a packet queued from now on comes with a wake-up.
    private func poll(_ socket: Int32, timeoutMilliseconds: Int32, _ readable: inout Int32) -> Int32 {
        guard timeoutMilliseconds > 0 else {
            return ampel_wake_poll(socket, reading.load(ordering: .relaxed) ? 1 : 0, mosquitto.wantsWrite ? 1 : 0, wakeReadFD, 0, &readable)
        }
        idle.store(true, ordering: .sequentiallyConsistent)
        defer { idle.store(false, ordering: .sequentiallyConsistent) }
        // A stop requested just before the flag went up found no sleeper to wake: notice it now.
        if !stopNoticed && stopRequested.load(ordering: .sequentiallyConsistent) { return 0 }
        return ampel_wake_poll(socket, reading.load(ordering: .relaxed) ? 1 : 0, mosquitto.wantsWrite ? 1 : 0, wakeReadFD, timeoutMilliseconds, &readable)
    }

    /// Called by any thread after queueing a packet: wakes this thread if it sleeps.
    @inline(__always)
    func wakeIfIdle() {
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        if idle.load(ordering: .relaxed), idle.exchange(false, ordering: .sequentiallyConsistent) {
            ampel_wake_signal(wakeWriteFD)
        }
    }

    /// Tells the session once that the broker accepted this connection.
    private func noteEstablished(_ session: MQTTSession) {
        guard !established, let connack = record.withLock({ $0.connack }), connack.reason == 0 else { return }
        established = true
        mosquitto.setLogCallback(enabled: false)
        session.connectionEstablished(sessionPresent: connack.sessionPresent)
    }

    /// Hands the publish notes of this loop step to the session: the MQTT 5 answers (topics to
    /// let go, refusals to name) and those that may be QoS 0 written-notes.
    private func decideNotes(_ session: MQTTSession) {
        if !answeredV5.isEmpty {
            session.settle(answeredV5)
            answeredV5.removeAll(keepingCapacity: true)
        }
        if undecidedNotes.isEmpty { return }
        session.publishesDone(mids: undecidedNotes)
        undecidedNotes.removeAll(keepingCapacity: true)
    }

    /// Hands the answers collected so far to the session; `spare` is this thread's empty
    /// buffer, swapped in to keep the capacity.
    private func deliverAnswers(_ spare: inout [(mid: Int32, result: AckResult)], _ session: MQTTSession) {
        answers.withLock { swap(&$0, &spare) }
        if spare.isEmpty { return }
        session.resume(answers: spare)
        spare.removeAll(keepingCapacity: true)
    }

    // MARK: - libmosquitto's callbacks (this thread, inside a loop step, through the session)

    func connack(reason: Int32, sessionPresent: Bool) {
        record.withLock { $0.connack = (reason, sessionPresent) }
    }

    func disconnected(reason: Int32) {
        record.withLock { $0.disconnectReason = reason }
    }

    /// Notes an answer if anybody may wait for one (see ``MQTTSession/possibleWaiters``).
    func answered(mid: Int32, _ result: AckResult, _ session: MQTTSession) {
        if case .published(let reason) = result {
            if !session.publishDone(mid: mid) { undecidedNotes.append(mid) }
            // Only MQTT 5 has reason codes, and only its topics are held.
            if configuration.protocolVersion == .v5 { answeredV5.append((mid, reason)) }
        }
        guard session.possibleWaiters.load(ordering: .sequentiallyConsistent) > 0 else { return }
        answers.withLock { $0.append((mid, result)) }
    }

    func logged(_ line: String) {
        record.withLock { $0.lastLogError = line }
    }
}
