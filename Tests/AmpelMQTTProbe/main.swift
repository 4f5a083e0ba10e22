// ampel-mqtt-probe: a test-only process around MQTTClient, for behaviour that needs a client
// process to die (the Last Will on kill -9). Not shipped.
//
//   ampel-mqtt-probe <port> <client-id> <will-topic> <will-payload> hold|disconnect
//
// Connects with the Will, prints "connected", then either blocks until killed (hold) or
// disconnects cleanly, prints "disconnected" and exits 0 (disconnect).
import AmpelMessages
import AmpelMQTT

#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count == 6, let port = Int(arguments[1]), ["hold", "disconnect"].contains(arguments[5]) else {
    print("usage: ampel-mqtt-probe <port> <client-id> <will-topic> <will-payload> hold|disconnect")
    exit(2)
}
var configuration = MQTTConfiguration(host: "127.0.0.1", port: port, clientID: arguments[2])
configuration.will = MQTTWill(topic: arguments[3], payload: Array(arguments[4].utf8), qos: .atLeastOnce)
configuration.keepAlive = .seconds(60)
let client = MQTTClient(configuration: configuration)
do {
    try await client.connect()
} catch {
    print("error \(error)")
    exit(1)
}
print("connected")
fflush(nil)
if arguments[5] == "hold" {
    while true { pause() }
}
await client.disconnect()
print("disconnected")
fflush(nil)
exit(0)
