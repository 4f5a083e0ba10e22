@testable import AmpelDaemon
import AmpelDomain
import AmpelMQTT
import Synchronization
import Testing

/// The intake's bound: when reading pauses and resumes, by count and by bytes, and the loop's
/// hold while it waits for the broker's acknowledgements.
@Suite("Intake gate")
struct IntakeGateTests {
    /// Records pause/resume calls; the rest of the transport is not used by the gate.
    final class ReadingSwitch: StubTransport {
        let calls = Mutex<[String]>([])
        var log: [String] { calls.withLock { $0 } }
        func pauseReading() { calls.withLock { $0.append("pause") } }
        func resumeReading() { calls.withLock { $0.append("resume") } }
    }

    @Test("a full queue pauses reading; half handled resumes it")
    func countBound() {
        let transport = ReadingSwitch()
        let gate = IntakeGate(limit: 10, transport: transport)
        gate.loopStarted()
        for _ in 0..<9 { gate.taken(bytes: 1) }
        #expect(transport.log.isEmpty)
        gate.taken(bytes: 1)
        #expect(transport.log == ["pause"])
        for _ in 0..<4 { gate.handled(bytes: 1) }
        #expect(transport.log == ["pause"])
        gate.handled(bytes: 1)
        #expect(transport.log == ["pause", "resume"])
        #expect(gate.pauses == 1)
    }

    @Test("a few large payloads pause reading by their bytes")
    func byteBound() {
        let transport = ReadingSwitch()
        let gate = IntakeGate(limit: 1_000, byteLimit: 1_000, transport: transport)
        gate.loopStarted()
        gate.taken(bytes: 600)
        #expect(transport.log.isEmpty)
        gate.taken(bytes: 600)
        #expect(transport.log == ["pause"])
        // 600 bytes still wait: more than half of the limit.
        gate.handled(bytes: 600)
        #expect(transport.log == ["pause"])
        gate.handled(bytes: 600)
        #expect(transport.log == ["pause", "resume"])
    }

    @Test("while the loop waits for acknowledgements reading goes on past the limit, and pauses again after")
    func heldOpen() {
        let transport = ReadingSwitch()
        let gate = IntakeGate(limit: 4, transport: transport)
        gate.loopStarted()
        for _ in 0..<4 { gate.taken(bytes: 1) }
        #expect(transport.log == ["pause"])
        gate.holdOpen(true)
        #expect(transport.log == ["pause", "resume"])
        for _ in 0..<3 { gate.taken(bytes: 1) }
        #expect(transport.log == ["pause", "resume"])
        gate.holdOpen(false)
        #expect(transport.log == ["pause", "resume", "pause"])
        // A stop's pause is for good: a hold does not lift it (no resume after the stop).
        gate.holdOpen(true)
        #expect(transport.log == ["pause", "resume", "pause", "resume"])
        gate.stopTaking()
        gate.holdOpen(false)
        gate.holdOpen(true)
        #expect(transport.log == ["pause", "resume", "pause", "resume", "pause"])
    }

    @Test("a stop before the loop runs pauses reading only once it runs: the start's round trips still get their answers")
    func stopDuringStart() {
        let transport = ReadingSwitch()
        let gate = IntakeGate(limit: 4, transport: transport)
        gate.stopTaking()
        #expect(transport.log.isEmpty)
        gate.loopStarted()
        #expect(transport.log == ["pause"])
        gate.readForGoodbye()
        #expect(transport.log == ["pause", "resume"])
    }

    @Test("during the start a full queue does not pause reading (the start awaits answers behind it); the loop's start does")
    func fullDuringStart() {
        let transport = ReadingSwitch()
        let gate = IntakeGate(limit: 4, transport: transport)
        for _ in 0..<6 { gate.taken(bytes: 1) }
        #expect(transport.log.isEmpty)
        gate.loopStarted()
        #expect(transport.log == ["pause"])
        for _ in 0..<4 { gate.handled(bytes: 1) }
        #expect(transport.log == ["pause", "resume"])
    }
}
