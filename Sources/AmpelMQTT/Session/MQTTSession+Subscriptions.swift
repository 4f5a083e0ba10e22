import AmpelMessages
import Synchronization

/// SUBSCRIBE and UNSUBSCRIBE: requests whose answer the caller awaits, and which the state
/// machine remembers to restore after a reconnect that did not keep the session.
extension MQTTSession {
    /// Subscribes and throws the first filter the broker refused (``subscribeAnswers(_:)`` for
    /// every filter's answer).
    func subscribe(_ filters: [(String, MQTTQoS)]) async throws(MQTTError) -> [MQTTQoS] {
        let answers = try await subscribeAnswers(filters)
        return try zip(filters, answers).map { (filter, answer) throws(MQTTError) -> MQTTQoS in
            switch answer {
            case .granted(let qos): return qos
            case .refused(let code):
                throw MQTTError(code: .rejected, reasonCode: code,
                                message: "broker refused subscription to '\(filter.0)': \(MQTTError.describeReason(code))")
            }
        }
    }

    /// Subscribes, and answers for each filter, in input order, what the broker granted or why
    /// it refused; throws only when the broker did not answer (the connection, a wrong packet).
    func subscribeAnswers(_ filters: [(String, MQTTQoS)]) async throws(MQTTError) -> [MQTTSubscriptionAnswer] {
        if filters.isEmpty { return [] }
        for (filter, _) in filters { _ = try MQTTTopicFilter(filter) }
        // One SUBSCRIBE per QoS (subscribe_multiple takes a single QoS), answers in input order.
        var answers = [MQTTSubscriptionAnswer](repeating: .refused(reasonCode: 0x80), count: filters.count)
        var failure: MQTTError?
        for qos in MQTTQoS.allCases {
            let indices = filters.indices.filter { filters[$0].1 == qos }
            if indices.isEmpty { continue }
            let names = indices.map { filters[$0].0 }
            switch try await request("subscribe to \(names)", { mosquitto.subscribe(names, qos: qos) }) {
            case .subscribed(let codes):
                for (position, index) in indices.enumerated() {
                    let code = position < codes.count ? codes[position] : 0x80
                    answers[index] = MQTTQoS(rawValue: Int(code)).map { .granted($0) } ?? .refused(reasonCode: Int(code))
                }
            case .failed(let error):
                if failure == nil { failure = error }
            case .published, .unsubscribed:
                if failure == nil { failure = MQTTError(code: .protocolError, message: "subscribe answered by a wrong acknowledgement") }
            }
        }
        let accepted = filters.indices.filter { if case .granted = answers[$0] { true } else { false } }.map {
            SessionStateMachine<AckWaiter, Waiter>.Subscription(filter: filters[$0].0, qos: filters[$0].1)
        }
        machine.withLock { $0.subscribed(accepted) }
        if let failure { throw failure }
        return answers
    }

    func unsubscribe(_ filters: [String]) async throws(MQTTError) {
        if filters.isEmpty { return }
        for filter in filters { _ = try MQTTTopicFilter(filter) }
        machine.withLock { $0.unsubscribed(filters) }
        if case .failed(let error) = try await request("unsubscribe from \(filters)", { mosquitto.unsubscribe(filters) }) {
            throw error
        }
    }

    /// Sends a packet that the broker acknowledges (SUBSCRIBE, UNSUBSCRIBE) and waits for the
    /// answer; the waiter is registered in the same lock hold as the send. Cancellation stops
    /// the wait (the packet may still go out).
    private func request(_ what: String, _ send: () -> (rc: Int32, mid: Int32)) async throws(MQTTError) -> AckResult {
        switch machine.withLock({ $0.requestDecision }) {
        case .closed: throw SessionErrors.closed
        case .notConnected: throw MQTTError(code: .noConnection, message: "not connected to \(brokerName)")
        case .send: break
        }
        let token = nextToken.add(1, ordering: .relaxed).newValue
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<AckResult, Never>) in
                let immediate: AckResult? = machine.withLock { machine in
                    switch machine.requestDecision {
                    case .closed: return .failed(SessionErrors.closed)
                    case .notConnected: return .failed(.mosquitto(MosquittoResult.noConnection, what))
                    case .send: break
                    }
                    possibleWaiters.add(1, ordering: .sequentiallyConsistent)
                    let (rc, mid) = send()
                    loop.wakeIfIdle()
                    guard rc == MosquittoResult.success, !Task.isCancelled else {
                        possibleWaiters.subtract(1, ordering: .sequentiallyConsistent)
                        return .failed(rc == MosquittoResult.success ? SessionErrors.cancelled(mid) : .mosquitto(rc, what))
                    }
                    machine.sent(mid: mid, token: token, waiter: .task(continuation))
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            cancelWait(token)
        }
    }
}
