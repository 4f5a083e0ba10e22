import AmpelCore
import AmpelMQTT
import Testing

@testable import AmpelMQTT
import AmpelMessages

/// The session's decisions, fed event by event without a broker or a thread. Waiters are plain
/// strings: the state machine only keeps and hands them back.
@Suite("Session state machine")
struct SessionStateMachineTests {
    typealias Machine = SessionStateMachine<String, String>

    private func machine(offlineLimit: Int = 100) -> Machine {
        Machine(backoff: Backoff(minimum: .milliseconds(100), maximum: .seconds(1)), offlineLimit: offlineLimit)
    }

    private func message(_ topic: String, qos: MQTTQoS = .atLeastOnce) -> OutgoingMessage {
        OutgoingMessage(topic: topic, payload: Array(topic.utf8), qos: qos, retain: false)
    }

    private let lost = MQTTError(code: .connectionLost, message: "lost")

    /// A machine that is connected, with `subscriptions` granted.
    private func connected(_ subscriptions: [String] = [], offlineLimit: Int = 100) -> Machine {
        var machine = machine(offlineLimit: offlineLimit)
        guard case .startNetworkThread = machine.connect("connect") else {
            Issue.record("connect did not start the thread")
            return machine
        }
        _ = machine.connectionEstablished(sessionPresent: false)
        machine.subscribed(subscriptions.map { .init(filter: $0, qos: .atLeastOnce) })
        return machine
    }

    @Test func connectStartsTheThreadOnceAndAnswersTheCallerOnCONNACK() {
        var machine = machine()
        guard case .startNetworkThread = machine.connect("first") else { Issue.record("no thread started"); return }
        guard case .fail(let error) = machine.connect("second") else { Issue.record("second connect accepted"); return }
        #expect(error.code == .alreadyConnected)
        #expect(!machine.isConnected)
        let established = machine.connectionEstablished(sessionPresent: false)
        #expect(established?.first == true)
        #expect(established?.connectWaiter == "first")
        #expect(established?.resubscribe.isEmpty == true)
        #expect(machine.isConnected)
    }

    @Test func publishesBeforeTheConnectionAreKeptAndSentInOrderAfterCONNACK() {
        var machine = machine()
        #expect(machine.publish(message("a"), token: 1, waiter: "a") == .queued)  // before connect()
        _ = machine.connect("connect")
        #expect(machine.publish(message("b"), token: 2, waiter: nil) == .queued)
        #expect(machine.publish(message("c"), token: 3, waiter: "c") == .queued)
        #expect(machine.offlineCount == 3)
        let established = machine.connectionEstablished(sessionPresent: false)
        #expect(established?.offline.map(\.message.topic) == ["a", "b", "c"])
        #expect(established?.offline.map(\.waiter) == ["a", nil, "c"])
        #expect(machine.offlineCount == 0)
        #expect(machine.publish(message("d"), token: 4, waiter: "d") == .send)
    }

    @Test func answersFindTheirWaiterOnceAndAnswersWithoutWaiterAreDropped() {
        var machine = connected()
        #expect(machine.publish(message("a"), token: 1, waiter: "a") == .send)
        machine.sent(mid: 7, token: 1, waiter: "a")
        #expect(machine.waitingCount == 1)
        #expect(machine.answered(mid: 8) == nil)  // an enqueued publish's PUBACK
        #expect(machine.answered(mid: 7) == "a")
        #expect(machine.answered(mid: 7) == nil)
        #expect(machine.waitingCount == 0)
    }

    /// libmosquitto's publish callback carries only the message id, for a QoS 0 publish written
    /// as for a QoS 1 publish answered: only the answers may lower the unanswered count.
    @Test func onlyAnswersOfQoS1PublishesCountAsAnswersNotQoS0WrittenNotes() {
        var machine = connected()
        machine.sentAtMostOnce(mid: 1)
        machine.sentAtMostOnce(mid: 2)
        #expect(machine.publish(message("q1"), token: 0, waiter: nil) == .send)  // enqueued QoS 1, mid 3
        #expect(machine.unwrittenAtMostOnceCount == 2)
        #expect(machine.publishDone(mid: 2) == false)
        #expect(machine.publishDone(mid: 3) == true)
        #expect(machine.publishDone(mid: 1) == false)
        #expect(machine.unwrittenAtMostOnceCount == 0)
        // The same id again, now a QoS 1 publish (ids come round): an answer.
        #expect(machine.publishDone(mid: 1) == true)
    }

    /// A QoS 0 publish not written when the connection ends is dropped by libmosquitto: its id,
    /// handed out again on the next connection, then belongs to an answer.
    @Test func aLostConnectionForgetsTheUnwrittenQoS0Publishes() {
        var machine = connected()
        machine.sentAtMostOnce(mid: 4)
        _ = machine.connectionEnded(lost, random: 0)
        #expect(machine.unwrittenAtMostOnceCount == 0)
        _ = machine.connectionEstablished(sessionPresent: true)
        #expect(machine.publishDone(mid: 4) == true)
    }

    @Test func aLostConnectionReconnectsWithGrowingBackoffAndKeepsTheWaiters() {
        var machine = connected()
        machine.sent(mid: 3, token: 1, waiter: "in flight")
        guard case .reconnect(let first, let reason, _) = machine.connectionEnded(lost, random: 0) else {
            Issue.record("no reconnect after a loss"); return
        }
        #expect(first == .milliseconds(100))
        #expect(reason == lost)
        #expect(!machine.isConnected)
        // Failed attempts double the delay up to the bound, and report no second loss.
        var delays: [Duration] = []
        for _ in 0..<5 {
            guard case .reconnect(let delay, let reason, _) = machine.connectionEnded(lost, random: 0) else {
                Issue.record("gave up reconnecting"); return
            }
            #expect(reason == nil)
            delays.append(delay)
        }
        #expect(delays == [.milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1)])
        // Jitter scales the delay down, never below half.
        guard case .reconnect(let jittered, _, _) = machine.connectionEnded(lost, random: 1) else { Issue.record("stopped"); return }
        #expect(jittered == .milliseconds(500))
        // Publishes wait offline; the message sent before the loss still finds its waiter
        // (libmosquitto resends it with the same id on the new connection).
        #expect(machine.publish(message("offline"), token: 2, waiter: "offline") == .queued)
        let established = machine.connectionEstablished(sessionPresent: true)
        #expect(established?.first == false)
        #expect(established?.connectWaiter == nil)
        #expect(established?.offline.map(\.message.topic) == ["offline"])
        #expect(machine.answered(mid: 3) == "in flight")
        // After a reconnect the backoff starts from the minimum again.
        guard case .reconnect(let again, _, _) = machine.connectionEnded(lost, random: 0) else { Issue.record("stopped"); return }
        #expect(again == .milliseconds(100))
    }

    @Test func subscriptionsAreRestoredOnlyWhenTheBrokerDidNotKeepTheSession() {
        var machine = connected(["a/#", "b/+"])
        machine.subscribed([.init(filter: "a/#", qos: .atMostOnce)])  // re-subscribed with another QoS
        machine.unsubscribed(["b/+"])
        _ = machine.connectionEnded(lost, random: 0)
        #expect(machine.connectionEstablished(sessionPresent: true)?.resubscribe == [])
        _ = machine.connectionEnded(lost, random: 0)
        #expect(machine.connectionEstablished(sessionPresent: false)?.resubscribe == [.init(filter: "a/#", qos: .atMostOnce)])
    }

    @Test func theOfflineQueueIsBoundedAndAcceptsAgainOnceFlushed() {
        var machine = connected(offlineLimit: 2)
        _ = machine.connectionEnded(lost, random: 0)
        #expect(machine.publish(message("1"), token: 1, waiter: "1") == .queued)
        #expect(machine.publish(message("2"), token: 2, waiter: nil) == .queued)
        #expect(machine.publish(message("3"), token: 3, waiter: "3") == .offlineQueueFull)
        #expect(machine.offlineCount == 2)
        #expect(machine.connectionEstablished(sessionPresent: true)?.offline.map(\.message.topic) == ["1", "2"])
        _ = machine.connectionEnded(lost, random: 0)
        #expect(machine.publish(message("4"), token: 4, waiter: nil) == .queued)
    }

    @Test func cancellingEndsTheWaitButNotTheDelivery() {
        var machine = connected()
        _ = machine.connectionEnded(lost, random: 0)
        #expect(machine.publish(message("queued"), token: 1, waiter: "queued") == .queued)
        // Waiting offline: the wait ends (no message id yet), the message stays queued.
        let queued = machine.cancel(token: 1)
        #expect(queued?.waiter == "queued" && queued?.mid == nil)
        #expect(machine.cancel(token: 1) == nil)
        let established = machine.connectionEstablished(sessionPresent: true)
        #expect(established?.offline.map(\.message.topic) == ["queued"])
        #expect(established?.offline.first?.waiter == nil)
        // Sent: the wait ends with its message id; the late answer finds nobody.
        machine.sent(mid: 5, token: 2, waiter: "sent")
        let sent = machine.cancel(token: 2)
        #expect(sent?.waiter == "sent" && sent?.mid == 5)
        #expect(machine.answered(mid: 5) == nil)
        #expect(machine.cancel(token: 99) == nil)
    }

    @Test func aFailedFirstConnectReportsToTheCallerAndAllowsAnotherConnect() {
        var machine = machine()
        _ = machine.connect("caller")
        guard case .stop(let failed, let reason) = machine.connectionEnded(lost, random: 0) else {
            Issue.record("retried a first connect"); return
        }
        #expect(failed?.0 == "caller" && failed?.1 == lost)
        #expect(reason == nil)
        #expect(machine.networkThreadExited() == nil)  // the session goes on
        guard case .startNetworkThread = machine.connect("again") else { Issue.record("second connect refused"); return }
    }

    @Test func disconnectStopsTheThreadThenFailsEveryWaiterAndRefusesNewWork() {
        var machine = connected()
        machine.sent(mid: 1, token: 1, waiter: "in flight")
        guard case .stopNetworkThread = machine.disconnect("stopper") else { Issue.record("thread not stopped"); return }
        #expect(machine.isClosed)
        #expect(machine.publish(message("late"), token: 2, waiter: "late") == .closed)
        #expect(machine.requestDecision == .closed)
        guard case .wait = machine.disconnect("second stopper") else { Issue.record("second disconnect not waiting"); return }
        guard case .stop(nil, let reason) = machine.connectionEnded(SessionErrors.requestedDisconnect, random: 0) else {
            Issue.record("reconnected while closing"); return
        }
        #expect(reason == SessionErrors.requestedDisconnect)  // the connection was up: report its end
        let closed = machine.networkThreadExited()
        #expect(closed?.failed == ["in flight"])
        #expect(closed?.exitWaiters == ["stopper", "second stopper"])
        #expect(machine.networkThreadExited() == nil)
        guard case .alreadyClosed = machine.disconnect("third") else { Issue.record("closed twice"); return }
    }

    @Test func disconnectWhileReconnectingFailsTheQueuedPublishes() {
        var machine = connected()
        _ = machine.connectionEnded(lost, random: 0)
        _ = machine.publish(message("q"), token: 1, waiter: "queued")
        guard case .stopNetworkThread = machine.disconnect(nil) else { Issue.record("thread not stopped"); return }
        guard case .stop(nil, nil) = machine.connectionEnded(lost, random: 0) else { Issue.record("not stopped"); return }
        #expect(machine.networkThreadExited()?.failed == ["queued"])
    }

    @Test func disconnectDuringTheFirstConnectFailsTheConnectCall() {
        var machine = machine()
        _ = machine.connect("caller")
        guard case .stopNetworkThread = machine.disconnect("stopper") else { Issue.record("thread not stopped"); return }
        guard case .stop(let failed, nil) = machine.connectionEnded(lost, random: 0) else { Issue.record("not stopped"); return }
        #expect(failed?.0 == "caller" && failed?.1 == SessionErrors.closed)
        #expect(machine.networkThreadExited()?.exitWaiters == ["stopper"])
    }

    @Test func disconnectBeforeConnectClosesAtOnce() {
        var machine = machine()
        _ = machine.publish(message("q"), token: 1, waiter: "queued")
        guard case .closedNow(let closed) = machine.disconnect("stopper") else { Issue.record("not closed at once"); return }
        #expect(closed.failed == ["queued"])
        #expect(closed.exitWaiters == ["stopper"])
        guard case .fail(let error) = machine.connect("late") else { Issue.record("connected after close"); return }
        #expect(error.code == .closed)
    }

    /// The hot path's flag and the phase never disagree, whatever the sequence of events.
    @Test func theConnectedFlagFollowsThePhase() {
        func phaseIsConnected(_ machine: Machine) -> Bool {
            if case .connected = machine.state { return true }
            return false
        }
        var machine = machine()
        var steps: [(String, (inout Machine) -> Void)] = [
            ("connect", { _ = $0.connect("c") }),
            ("CONNACK", { _ = $0.connectionEstablished(sessionPresent: false) }),
            ("publish", { _ = $0.publish(OutgoingMessage(topic: "t", payload: [], qos: .atLeastOnce, retain: false), token: 1, waiter: "w") }),
            ("loss", { _ = $0.connectionEnded(MQTTError(code: .connectionLost, message: "lost"), random: 0) }),
            ("failed attempt", { _ = $0.connectionEnded(MQTTError(code: .connectionLost, message: "lost"), random: 0) }),
            ("CONNACK again", { _ = $0.connectionEstablished(sessionPresent: true) }),
            ("disconnect", { _ = $0.disconnect("d") }),
            ("ended", { _ = $0.connectionEnded(SessionErrors.requestedDisconnect, random: 0) }),
            ("exited", { _ = $0.networkThreadExited() }),
        ]
        steps.insert(("before connect", { _ = $0.answered(mid: 1) }), at: 0)
        for (name, step) in steps {
            step(&machine)
            #expect(machine.isConnected == phaseIsConnected(machine), "after \(name)")
        }
    }

    @Test func aCONNACKWhileClosingOnlyAnswersTheConnectCall() {
        var machine = machine()
        _ = machine.connect("caller")
        _ = machine.publish(message("q"), token: 1, waiter: "queued")
        _ = machine.disconnect(nil)
        let established = machine.connectionEstablished(sessionPresent: false)
        #expect(established?.connectWaiter == "caller")
        #expect(established?.offline.isEmpty == true)
        #expect(!machine.isConnected)
        guard case .stop(nil, let reason) = machine.connectionEnded(SessionErrors.requestedDisconnect, random: 0) else {
            Issue.record("not stopped"); return
        }
        #expect(reason == SessionErrors.requestedDisconnect)
        #expect(machine.networkThreadExited()?.failed == ["queued"])
    }

    // MARK: - A list of brokers (the nodes of one cluster)

    private func cluster(_ count: Int) -> Machine {
        Machine(backoff: Backoff(minimum: .milliseconds(100), maximum: .seconds(1)), offlineLimit: 100, brokerCount: count)
    }

    /// The broker the machine names next, and the delay before it; nil when it stops.
    private func next(_ machine: inout Machine) -> (broker: Int, delay: Duration)? {
        guard case .reconnect(let delay, _, let broker) = machine.connectionEnded(lost, random: 0) else { return nil }
        return (broker, delay)
    }

    @Test func firstConnectTriesEveryBrokerInOrderAtOnceAndFailsOnlyWhenNoneAnswered() {
        var machine = cluster(3)
        _ = machine.connect("connect")
        #expect(next(&machine)?.broker == 1)
        guard case .reconnect(let delay, let lostConnection, 2) = machine.connectionEnded(lost, random: 0) else {
            Issue.record("the third broker was not tried"); return
        }
        #expect(delay == .zero)
        #expect(lostConnection == nil)
        guard case .stop(let failed, _) = machine.connectionEnded(lost, random: 0) else {
            Issue.record("went on after the last broker"); return
        }
        #expect(failed?.0 == "connect")
        // connect() again starts from the first broker.
        _ = machine.connect("again")
        #expect(next(&machine)?.broker == 1)
        let established = machine.connectionEstablished(sessionPresent: false)
        #expect(established?.broker == 1)
        #expect(established?.failover == false)
        #expect(machine.connectedBroker == 1)
    }

    @Test func aLostConnectionGoesToTheNextBrokerRoundTheListWithTheBackoffAndCountsAFailover() {
        var machine = cluster(3)
        _ = machine.connect("connect")
        _ = machine.connectionEstablished(sessionPresent: false)
        #expect(machine.connectedBroker == 0)
        // Node 0 dies: node 1, then 2, then 0 again, the backoff growing once per round of the list.
        let attempts = (0..<7).compactMap { _ in next(&machine) }
        #expect(attempts.map(\.broker) == [1, 2, 0, 1, 2, 0, 1])
        #expect(attempts.map(\.delay) == [.milliseconds(100), .milliseconds(100), .milliseconds(100),
                                          .milliseconds(200), .milliseconds(200), .milliseconds(200), .milliseconds(400)])
        let established = machine.connectionEstablished(sessionPresent: true)
        #expect(established?.broker == 1)
        #expect(established?.failover == true)
        #expect(machine.failovers == 1)
        // Back on the same node after a blip is a reconnect, not a failover.
        #expect(next(&machine)?.broker == 2)
        #expect(next(&machine)?.broker == 0)
        #expect(next(&machine)?.broker == 1)
        #expect(machine.connectionEstablished(sessionPresent: true)?.failover == false)
        #expect(machine.failovers == 1)
    }

    @Test func oneBrokerIsRetriedAlone() {
        var machine = cluster(1)
        _ = machine.connect("connect")
        _ = machine.connectionEstablished(sessionPresent: false)
        #expect((0..<3).compactMap { _ in next(&machine)?.broker } == [0, 0, 0])
        #expect(machine.connectionEstablished(sessionPresent: true)?.failover == false)
        #expect(machine.failovers == 0)
    }
}
