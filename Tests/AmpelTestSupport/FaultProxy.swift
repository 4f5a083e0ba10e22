import Foundation
import Synchronization

/// A TCP proxy on a loopback port in front of one upstream (a broker) that a test can make
/// fail the way networks do: pass everything, lose one direction while both ends believe the
/// connection is up (a half-open link), or reset every connection (RST).
///
/// One thread accepts, one thread per connection moves bytes both ways (`poll` with a short
/// timeout, so that a mode change or a reset takes effect within 20 ms). Lost bytes are read
/// and dropped, as a broken path drops packets: neither end's socket fills or closes.
///
/// ```swift
/// let proxy = try FaultProxy(upstreamPort: broker.port)
/// proxy.mode = .halfOpen     // the client's packets arrive, the answers do not
/// proxy.resetAll()           // every open connection gets an RST
/// ```
public final class FaultProxy: Sendable {
    public enum Mode: Sendable, Equatable {
        /// Bytes go both ways.
        case pass
        /// Client to upstream goes, upstream to client is lost: the broker takes a publish and
        /// its acknowledgement never reaches the client.
        case halfOpen
    }

    public let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private let state = Mutex(State())

    private struct State {
        var mode = Mode.pass
        /// Raised by ``resetAll()``: a connection older than this generation resets itself.
        var resetGeneration = 0
        var resets = 0
        var stopped = false
    }

    /// Listens on a free loopback port and forwards to `127.0.0.1:upstreamPort`.
    public init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw MosquittoBroker.BrokerError(description: "socket() failed") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw MosquittoBroker.BrokerError(description: "the fault proxy cannot listen: errno \(errno)")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "fault-proxy-accept"
        thread.start()
    }

    deinit { stop() }

    /// What happens to the bytes of every connection, open or new, from now on.
    public var mode: Mode {
        get { state.withLock { $0.mode } }
        set { state.withLock { $0.mode = newValue } }
    }

    /// Resets every connection open now (SO_LINGER 0 and close: both ends get an RST). New
    /// connections are accepted as before.
    public func resetAll() {
        state.withLock { $0.resetGeneration += 1 }
    }

    /// Connections reset so far.
    public var resets: Int { state.withLock { $0.resets } }

    /// Stops accepting and resets every connection; safe to call more than once.
    public func stop() {
        let first = state.withLock { state -> Bool in
            defer { state.stopped = true; state.resetGeneration += 1 }
            return !state.stopped
        }
        // Wakes the blocked accept() (Linux); the accepting thread closes the socket.
        if first { shutdown(listener, Int32(SHUT_RDWR)) }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                break
            }
            let generation: Int? = state.withLock { $0.stopped ? nil : $0.resetGeneration }
            guard let generation, let upstream = connectUpstream() else {
                Self.reset(client)
                continue
            }
            let thread = Thread { [self] in relay(client: client, upstream: upstream, generation: generation) }
            thread.name = "fault-proxy-relay"
            thread.start()
        }
        close(listener)
    }

    private func connectUpstream() -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = Self.loopback(port: upstreamPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return fd
    }

    /// Closes `fd` with an RST rather than a FIN.
    private static func reset(_ fd: Int32) {
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        close(fd)
    }

    private func relay(client: Int32, upstream: Int32, generation: Int) {
        var one: Int32 = 1
        setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: upstream, events: Int16(POLLIN), revents: 0)]
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var resetNow = false
        loop: while true {
            let (mode, current) = state.withLock { ($0.mode, $0.resetGeneration) }
            if current != generation {
                resetNow = true
                break
            }
            let ready = poll(&fds, 2, 20)
            if ready < 0 && errno != EINTR { break }
            guard ready > 0 else { continue }
            for (index, from) in [client, upstream].enumerated() where fds[index].revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                if count <= 0 { break loop }  // one end closed: close the other
                let toUpstream = index == 0
                let passes = mode == .pass || (mode == .halfOpen && toUpstream)
                guard passes else { continue }
                let to = toUpstream ? upstream : client
                var sent = 0
                while sent < count {
                    let written = buffer.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                    if written <= 0 { break loop }
                    sent += written
                }
            }
        }
        if resetNow {
            Self.reset(client)
            Self.reset(upstream)
        } else {
            close(client)
            close(upstream)
        }
        if resetNow { state.withLock { $0.resets += 1 } }
    }
}
