import Logging
import Synchronization

/// The session's end: DISCONNECT or a dropped connection, the network thread stopped, every
/// waiter failed; and the counters it leaves.
extension MQTTSession {
    /// Shutdown: DISCONNECT (so the broker discards the Will) or, with `sendDisconnect` false,
    /// a dropped connection (so that it publishes it); stop the thread, fail waiters.
    func disconnect(sendDisconnect: Bool) async {
        _ = await withCheckedContinuation { (continuation: Waiter) in
            switch machine.withLock({ $0.disconnect(continuation) }) {
            case .stopNetworkThread: loop.requestStop(sendDisconnect: sendDisconnect)
            case .wait: break
            case .closedNow(let closed): finish(closed)
            case .alreadyClosed: continuation.resume(returning: .success(false))
            }
        }
    }

    /// The owning MQTTClient went away without `disconnect()`: the same steps, without waiting.
    /// The network thread keeps the session alive until it has exited.
    func shutdownFromDeinit() {
        switch machine.withLock({ $0.disconnect(nil) }) {
        case .stopNetworkThread: loop.requestStop()
        case .closedNow(let closed): finish(closed)
        case .wait, .alreadyClosed: break
        }
    }

    /// The network thread ended.
    func networkThreadExited() {
        if let closed = machine.withLock({ $0.networkThreadExited() }) { finish(closed) }
    }

    func finish(_ closed: SessionStateMachine<AckWaiter, Waiter>.Closed) {
        possibleWaiters.store(0, ordering: .sequentiallyConsistent)
        releaseAnswersWaiter()
        for waiter in closed.failed { waiter.resume(returning: .failed(SessionErrors.closed)) }
        closed.connectWaiter?.resume(returning: .failure(SessionErrors.closed))
        messageContinuation.finish()
        eventContinuation.finish()
        for waiter in closed.exitWaiters { waiter.resume(returning: .success(false)) }
    }

    var counters: MQTTCounters {
        MQTTCounters(
            sent: sentCount.load(ordering: .relaxed),
            acknowledged: acknowledgedCount.load(ordering: .relaxed),
            received: receivedCount.load(ordering: .relaxed),
            droppedOnOverflow: droppedCount.load(ordering: .relaxed),
            reconnects: reconnectCount.load(ordering: .relaxed),
            failovers: failoverCount.load(ordering: .relaxed))
    }
}
