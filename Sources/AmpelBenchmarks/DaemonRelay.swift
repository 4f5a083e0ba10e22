import AmpelMessages
import AmpelMQTT
import Foundation

/// The do-nothing baseline for the daemon benchmark: what any MQTT client costs that takes a
/// message in and puts one out, with the same broker, library, QoS and retain flag as the
/// daemon's state publish, but no decoding, lookup or classification.
enum DaemonRelay {
    static func run(host: String, port: Int) async throws {
        var configuration = MQTTConfiguration(host: host, port: port, clientID: "bench-relay")
        configuration.maxInflight = 1_000
        configuration.receiveMaximum = 1_000
        configuration.incomingBufferSize = 100_000
        let client = MQTTClient(configuration: configuration)
        try await client.connect()
        try await client.subscribe([("bench/relay/in/+", .atLeastOnce)])
        print("relay ready")
        fflush(nil)  // all streams: run.sh waits for this line
        // Publishes run concurrently (each QoS 1 publish returns on its PUBACK), at most
        // `lanes` at once, so the relay is never limited by one round trip per message.
        let lanes = 256
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for await message in client.messages {
                guard let key = message.topic.split(separator: "/").last else { continue }
                if running >= lanes {
                    await group.next()
                    running -= 1
                }
                let topic = "bench/relay/out/\(key)/state"
                let payload = message.payload
                group.addTask {
                    try? await client.publish(topic: topic, payload: payload, qos: .atLeastOnce, retain: true)
                }
                running += 1
            }
        }
    }
}
