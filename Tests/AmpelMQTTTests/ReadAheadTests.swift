import CAmpelLinux
import Foundation
import Testing

/// The MQTT socket's read-ahead (`ampel_read_ahead_*` in CAmpelLinux): reads of the attached
/// socket on the attaching thread must see exactly the bytes, boundaries aside, that the kernel
/// would have given them, and nothing else may change.
@Suite("Read-ahead of the MQTT socket")
struct ReadAheadTests {
    /// A connected, non-blocking stream socket pair (the MQTT socket is non-blocking too),
    /// close-on-exec: a child process that other tests start meanwhile must not keep an end open.
    private static func pair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        return (fds[0], fds[1])
    }

    private static func send(_ fd: Int32, _ bytes: [UInt8]) {
        let sent = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        #expect(sent == bytes.count)
    }

    /// `read` as libmosquitto calls it: `count` bytes at most, the result and errno as returned.
    private static func read(_ fd: Int32, _ count: Int) -> (result: Int, errno: Int32, bytes: [UInt8]) {
        var buffer = [UInt8](repeating: 0, count: count)
        errno = 0
        let result = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, count) }
        let error = errno
        return (result, error, Array(buffer.prefix(max(result, 0))))
    }

    @Test("small reads take the bytes in order across refills; EAGAIN and the end of the stream pass through")
    func bytesInOrder() throws {
        let (socket, peer) = try Self.pair()
        defer { close(socket); close(peer) }
        #expect(ampel_read_ahead_attach(socket) == 0)
        defer { ampel_read_ahead_detach() }

        // Nothing sent yet: EAGAIN, as from the kernel.
        let empty = Self.read(socket, 1)
        #expect(empty.result == -1 && empty.errno == EAGAIN)
        #expect(ampel_read_ahead_pending(socket) == 0)

        // 100,000 bytes (more than one refill) in uneven chunks, read 1, 2 or 3 bytes at a time
        // (libmosquitto's type byte, length bytes, rest).
        let sent = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        var received: [UInt8] = []
        var offset = 0
        var step = 0
        while received.count < sent.count {
            if offset < sent.count {
                let chunk = min(7_919, sent.count - offset)
                Self.send(peer, Array(sent[offset..<offset + chunk]))
                offset += chunk
            }
            while true {
                step += 1
                let got = Self.read(socket, 1 + step % 3)
                if got.result < 0 {
                    #expect(got.errno == EAGAIN)
                    break
                }
                #expect(got.result > 0)
                received += got.bytes
            }
        }
        #expect(received == sent)

        // Bytes read ahead show as pending until taken, and poll does not wait while they are.
        Self.send(peer, [1, 2, 3, 4])
        #expect(Self.read(socket, 1).bytes == [1])
        #expect(ampel_read_ahead_pending(socket) != 0)
        var readable: Int32 = 0
        var wakeWrite: Int32 = -1
        let wakeRead = ampel_wake_create(&wakeWrite)
        defer { ampel_wake_close(wakeRead, wakeWrite) }
        let started = ContinuousClock.now
        #expect(ampel_wake_poll(socket, 1, 0, wakeRead, 10_000, &readable) == 1)
        #expect(readable == 1)
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(Self.read(socket, 10).bytes == [2, 3, 4])
        #expect(ampel_read_ahead_pending(socket) == 0)

        // The end of the stream: 0, as from the kernel. Awaited: a child that another test forks
        // holds a copy of `peer` until it execs, and the stream ends only when that is closed too.
        close(peer)
        var hangUp = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        #expect(poll(&hangUp, 1, 30_000) == 1)
        let end = Self.read(socket, 4)
        #expect(end.result == 0, "errno \(end.errno)")
    }

    @Test("other descriptors, other threads and a detached socket read from the kernel as before")
    func nothingElseChanges() throws {
        let (socket, peer) = try Self.pair()
        let (other, otherPeer) = try Self.pair()
        defer { close(socket); close(peer); close(other); close(otherPeer) }
        #expect(ampel_read_ahead_attach(socket) == 0)

        // A read of nothing takes nothing from the kernel.
        Self.send(peer, [4])
        #expect(Self.read(socket, 0).result == 0)
        var queued: Int32 = 0
        _ = ioctl(socket, UInt(FIONREAD), &queued)
        #expect(queued == 1)
        #expect(Self.read(socket, 1).bytes == [4])

        // A read of another descriptor takes only what it asks for: the rest stays in the kernel.
        Self.send(otherPeer, [9, 8, 7])
        #expect(Self.read(other, 1).bytes == [9])
        var available: Int32 = 0
        _ = ioctl(other, UInt(FIONREAD), &available)
        #expect(available == 2)

        // The attached socket on another thread: no read-ahead there either.
        Self.send(peer, [5, 6, 7])
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var elsewhere: ([UInt8], Int32) = ([], -1)
        Thread {
            let got = Self.read(socket, 1).bytes
            var left: Int32 = 0
            _ = ioctl(socket, UInt(FIONREAD), &left)
            elsewhere = (got, left)
            done.signal()
        }.start()
        done.wait()
        #expect(elsewhere.0 == [5])
        #expect(elsewhere.1 == 2)

        // This thread reads ahead; detached, what it read ahead is dropped with the connection
        // and the next read goes to the kernel.
        #expect(Self.read(socket, 1).bytes == [6])
        var left: Int32 = 0
        _ = ioctl(socket, UInt(FIONREAD), &left)
        #expect(left == 0)
        ampel_read_ahead_detach()
        #expect(ampel_read_ahead_pending(socket) == 0)
        Self.send(peer, [1, 2])
        #expect(Self.read(socket, 1).bytes == [1])
        _ = ioctl(socket, UInt(FIONREAD), &left)
        #expect(left == 1)
    }
}
