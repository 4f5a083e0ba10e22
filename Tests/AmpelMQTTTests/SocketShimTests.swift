import CAmpelLinux
import Foundation
import Synchronization
import Testing

@testable import AmpelMQTT

/// The socket calls of CAmpelLinux that the network thread relies on besides the read-ahead:
/// a libmosquitto handle without its wake-up socket pair, and TCP_CORK around a loop step's write.
@Suite("Socket shims of the MQTT network thread")
struct SocketShimTests {
    private static func socketPair() -> (result: Int32, errno: Int32, fds: [Int32]) {
        var fds: [Int32] = [-1, -1]
        errno = 0
        let result = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        return (result, errno, fds)
    }

    @Test("socket pairs are refused on the refusing thread only, and only while it refuses")
    func refusalIsPerThread() throws {
        let before = ampel_socket_pairs_refused()
        ampel_refuse_socket_pairs(1)
        let refused = Self.socketPair()
        // Another thread meanwhile gets its pair.
        let other = Mutex<(result: Int32, errno: Int32, fds: [Int32])?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            other.withLock { $0 = Self.socketPair() }
            done.signal()
        }
        done.wait()
        ampel_refuse_socket_pairs(0)
        let after = Self.socketPair()
        defer { for fd in after.fds where fd >= 0 { close(fd) } }

        #expect(refused.result == -1 && refused.errno == EMFILE)
        #expect(ampel_socket_pairs_refused() == before + 1)
        let elsewhere = try #require(other.withLock { $0 })
        defer { for fd in elsewhere.fds where fd >= 0 { close(fd) } }
        #expect(elsewhere.result == 0)
        #expect(after.result == 0)
    }

    @Test("a client handle is made without the socket pair that only mosquitto_loop reads")
    func clientHandleHasNoSocketPair() {
        let before = ampel_socket_pairs_refused()
        let client = MosquittoClient(configuration: MQTTConfiguration(host: "127.0.0.1", clientID: "shim-test"))
        // libmosquitto asked for its pair on this thread and was refused: queueing a packet
        // then writes no wake-up byte.
        #expect(ampel_socket_pairs_refused() == before + 1)
        // And the thread gets pairs again afterwards.
        let after = Self.socketPair()
        #expect(after.result == 0)
        for fd in after.fds where fd >= 0 { close(fd) }
        withExtendedLifetime(client) {}
    }

    /// A connected loopback TCP pair: (client, accepted peer).
    private static func tcpPair() throws -> (Int32, Int32) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw POSIXError(.EIO) }
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 1) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) == 0 }
        }
        guard client >= 0, connected else {
            if client >= 0 { close(client) }
            throw POSIXError(.ECONNREFUSED)
        }
        let peer = accept(listener, nil, nil)
        guard peer >= 0 else {
            close(client)
            throw POSIXError(.EIO)
        }
        var on: Int32 = 1
        _ = setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        return (client, peer)
    }

    private static func readable(_ fd: Int32, timeoutMilliseconds: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, timeoutMilliseconds) == 1
    }

    @Test("a corked TCP socket holds small writes until the cork comes off, then sends them together")
    func corkHoldsWritesUntilUncorked() throws {
        let (client, peer) = try Self.tcpPair()
        defer { close(client); close(peer) }
        // Uncorked (with TCP_NODELAY, as libmosquitto's socket), a small write reaches the peer
        // at once: loopback delivers within the write.
        let probe: [UInt8] = [0x40, 0x02, 0x00, 0x01]
        #expect(probe.withUnsafeBytes { write(client, $0.baseAddress, $0.count) } == probe.count)
        #expect(Self.readable(peer, timeoutMilliseconds: 1000))
        var buffer = [UInt8](repeating: 0, count: 4096)
        #expect(recv(peer, &buffer, buffer.count, 0) == probe.count)

        #expect(ampel_tcp_cork(client, 1) == 0)
        let corkedAt = ContinuousClock.now
        for _ in 0..<3 {
            #expect(probe.withUnsafeBytes { write(client, $0.baseAddress, $0.count) } == probe.count)
        }
        let heldBack = !Self.readable(peer, timeoutMilliseconds: 0)
        // The kernel sends corked bytes after 200 ms anyway: only a quicker look can tell.
        if ContinuousClock.now - corkedAt < .milliseconds(150) {
            #expect(heldBack)
        }
        #expect(ampel_tcp_cork(client, 0) == 0)
        #expect(Self.readable(peer, timeoutMilliseconds: 1000))
        #expect(recv(peer, &buffer, buffer.count, 0) == 3 * probe.count)
    }

    @Test("a socket that is not TCP refuses the cork with an error")
    func corkOnANonTCPSocketFails() {
        let pair = Self.socketPair()
        defer { for fd in pair.fds where fd >= 0 { close(fd) } }
        #expect(pair.result == 0)
        #expect(ampel_tcp_cork(pair.fds[0], 1) == -1)
    }
}
