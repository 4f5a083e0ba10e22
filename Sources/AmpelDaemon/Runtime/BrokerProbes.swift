import AmpelMessages
import AmpelMQTT
import Synchronization

/// Waits for the broker to take what was handed over before, and then acts: the paced walks'
/// next batch, the record of removed Home Assistant configs.
///
/// Each probe publishes `online` to `bridge/state` at QoS 1, on the daemon's one connection:
/// its acknowledgement means the broker took every publish before it. `online` is the value
/// `bridge/state` holds while the daemon runs, so a probe may overtake or follow any other
/// publish, but not the goodbye's `offline`: retained after it, `online` would stay, and no
/// Will corrects a clean leave. So every probe under way is kept here, and the stop cancels
/// and awaits all of them (``finishAll()``) before it says offline; a cancelled publish is
/// still handed over, in order, before the goodbye.
final class BrokerProbes: Sendable {
    private struct Running {
        var next: UInt64 = 0
        var tasks: [UInt64: Task<Void, Never>] = [:]
    }

    private let transport: any DaemonTransport
    private let probe: OutgoingMessage
    private let running = Mutex(Running())

    init(transport: any DaemonTransport, topics: Topics) {
        self.transport = transport
        probe = OutgoingMessage(topic: topics.bridgeState, text: BridgeState.online, qos: .atLeastOnce, retain: true)
    }

    /// Publishes a probe and passes its outcome to `then` (`nil`: the broker acknowledged it),
    /// on a task of its own: the caller never waits for the broker.
    func start(then: @escaping @Sendable (MQTTError?) -> Void) {
        let transport = self.transport
        let probe = self.probe
        // Created under the lock its end takes too: the task cannot leave before it is listed.
        running.withLock { running in
            let id = running.next
            running.next += 1
            running.tasks[id] = Task.detached { [self] in
                do throws(MQTTError) {
                    try await transport.publish(probe)
                    then(nil)
                } catch {
                    then(error)
                }
                _ = self.running.withLock { $0.tasks.removeValue(forKey: id) }
            }
        }
    }

    /// Probes under way.
    var count: Int { running.withLock { $0.tasks.count } }

    /// Cancels every probe under way and returns once each has ended (its `online` handed over).
    func finishAll() async {
        let tasks = running.withLock { Array($0.tasks.values) }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }
}
