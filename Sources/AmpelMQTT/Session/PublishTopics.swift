/// The topic of each QoS 1/2 publish handed to libmosquitto, by message id: libmosquitto's
/// publish callback gives a refusal (a PUBACK reason code of 0x80 or above) only the id, and a
/// refusal that does not say its topic cannot be acted on. One slot per possible id
/// (1...65535, reused as libmosquitto reuses them), allocated with the first publish: a store
/// per publish, no allocation, instead of a dictionary entry made and removed for each.
struct PublishTopics {
    private var slots: [String?] = []

    mutating func note(_ topic: String, mid: Int32) {
        guard mid > 0, mid <= 65_535 else { return }
        if slots.isEmpty { slots = Array(repeating: nil, count: 65_536) }
        slots[Int(mid)] = topic
    }

    subscript(mid: Int32) -> String? {
        mid > 0 && Int(mid) < slots.count ? slots[Int(mid)] : nil
    }
}
