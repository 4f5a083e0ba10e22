/// The topic of each QoS 1/2 publish handed to libmosquitto and not answered yet, by message
/// id: libmosquitto's publish callback gives a refusal (a PUBACK reason code of 0x80 or above)
/// only the id, and a refusal that does not say its topic cannot be acted on. One slot per
/// possible id (1...65535, reused as libmosquitto reuses them), allocated with the first
/// publish: a store per publish, no allocation, instead of a dictionary entry made and removed
/// for each.
///
/// A slot is emptied once its publish is answered (``forget(mid:)``): a topic kept until its id
/// comes round again kept up to 65,535 topic strings alive, scattered over the heap, and the
/// daemon's settled memory with 100,000 devices rose from 40 to 54 MiB (docs/benchmarks.md).
struct PublishTopics {
    private var slots: [String?] = []

    /// Slots holding a topic (a scan, for the tests).
    var count: Int { slots.count { $0 != nil } }

    mutating func note(_ topic: String, mid: Int32) {
        guard mid > 0, mid <= 65_535 else { return }
        if slots.isEmpty { slots = Array(repeating: nil, count: 65_536) }
        slots[Int(mid)] = topic
    }

    mutating func forget(mid: Int32) {
        guard mid > 0, Int(mid) < slots.count else { return }
        slots[Int(mid)] = nil
    }

    subscript(mid: Int32) -> String? {
        mid > 0 && Int(mid) < slots.count ? slots[Int(mid)] : nil
    }
}
