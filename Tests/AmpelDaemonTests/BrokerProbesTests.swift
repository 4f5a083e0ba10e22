import AmpelMessages
@testable import AmpelDaemon
import AmpelDomain
import AmpelMQTT
import Synchronization
import Testing

/// The probes that pace the walks and the discovery record: the stop ends every one of them
/// before its `offline`, also those a later walk started after them.
@Suite("Broker probes")
struct BrokerProbesTests {
    /// A broker that never answers: each publish waits until its task is cancelled, and is
    /// then handed over (as a cancelled QoS 1 publish of the MQTT client still goes out).
    final class SilentBroker: StubTransport {
        private let state = Mutex<[OutgoingMessage]>([])
        private let arrivals: AsyncStream<Void>.Continuation
        let arrived: AsyncStream<Void>

        init() { (arrived, arrivals) = AsyncStream.makeStream() }

        var handedOver: [OutgoingMessage] { state.withLock { $0 } }

        func publish(_ message: OutgoingMessage) async throws(MQTTError) {
            let stop = AsyncStream<Void>.makeStream()
            await withTaskCancellationHandler {
                arrivals.yield()
                for await _ in stop.stream {}
            } onCancel: {
                stop.continuation.finish()
            }
            state.withLock { $0.append(message) }
            throw MQTTError(code: .cancelled, message: "cancelled")
        }
    }

    @Test("the stop ends every probe under way, not only the latest of each kind")
    func finishAllEndsEveryProbe() async {
        let broker = SilentBroker()
        let topics = Topics(base: "ampel")
        let probes = BrokerProbes(transport: broker, topics: topics)
        let outcomes = Mutex<[Bool]>([])
        // A walk's probe, then a reconnect's new walk and a discovery record before it answered.
        for _ in 0..<3 {
            probes.start { error in outcomes.withLock { $0.append(error == nil) } }
        }
        var arrivals = broker.arrived.makeAsyncIterator()
        for _ in 0..<3 { await arrivals.next() }
        #expect(probes.count == 3)

        await probes.finishAll()

        let online = OutgoingMessage(topic: topics.bridgeState, text: BridgeState.online, qos: .atLeastOnce, retain: true)
        #expect(broker.handedOver == [online, online, online])
        #expect(outcomes.withLock { $0 } == [false, false, false])
        #expect(probes.count == 0)
    }
}
