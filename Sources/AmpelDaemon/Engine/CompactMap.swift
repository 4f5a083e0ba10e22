/// A `String`-keyed map that stores keys and values in two dense arrays and finds them through
/// an open-addressing table of 32-bit positions (linear probing, load at most 1/2).
///
/// For 100,000 devices a `Dictionary<String, Entry>` keeps 262,144 buckets of key and value
/// (its load factor is at most 3/4 and capacities are powers of two): 12.6 MB with 32-byte
/// values. Here the buckets are 4 bytes and keys and values sit in arrays sized to the count:
/// about 7 MB. Order is insertion order; removal moves the last element into the gap.
///
/// Kept over swift-collections' `OrderedDictionary`: for 100,000 devices it took 6.56 MiB of heap vs
/// 7.00 here, but took the devices in 2.2 times slower and answered unknown keys 1.6 times slower
/// (benchmark Benchmarks/structures).
///
/// Keys are compared and hashed by their UTF-8 bytes, not as Swift `String`s (which compare by
/// canonical equivalence): MQTT topics are byte strings, so `café` precomposed and `cafe` with a
/// combining accent are two topics and two devices, and a `String` comparison made them one,
/// dropping the second one's older fix as out of order (found by the fuzz harness).
struct CompactMap<Value: Sendable>: Sendable {
    private(set) var keys: [String] = []
    private(set) var values: [Value] = []
    /// Positions into `keys`/`values`; `empty` marks a free bucket. Count is a power of two.
    private var buckets: [UInt32] = []

    private static var empty: UInt32 { .max }

    var count: Int { keys.count }

    subscript(key: String) -> Value? {
        get {
            guard let (_, position) = find(key) else { return nil }
            return values[Int(position)]
        }
        set {
            if let newValue { insert(key, newValue) } else { remove(key) }
        }
    }

    /// The bucket holding `key` and its position, or `nil`.
    private func find(_ key: String) -> (bucket: Int, position: UInt32)? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count - 1
        var bucket = Self.hash(key) & mask
        while true {
            let position = buckets[bucket]
            if position == Self.empty { return nil }
            if Self.same(keys[Int(position)], key) { return (bucket, position) }
            bucket = (bucket + 1) & mask
        }
    }

    /// Changes every value where it is, keeping keys and order.
    mutating func updateValues(_ change: (inout Value) -> Void) {
        for index in values.indices { change(&values[index]) }
    }

    private mutating func insert(_ key: String, _ value: Value) {
        if let (_, position) = find(key) {
            values[Int(position)] = value
            return
        }
        precondition(keys.count < Int(UInt32.max - 1), "CompactMap is full")
        if (keys.count + 1) * 2 > buckets.count { rebuild(capacity: max(16, buckets.count * 2)) }
        let position = UInt32(keys.count)
        keys.append(key)
        values.append(value)
        place(key, position)
    }

    private mutating func place(_ key: String, _ position: UInt32) {
        let mask = buckets.count - 1
        var bucket = Self.hash(key) & mask
        while buckets[bucket] != Self.empty { bucket = (bucket + 1) & mask }
        buckets[bucket] = position
    }

    private mutating func rebuild(capacity: Int) {
        buckets = [UInt32](repeating: Self.empty, count: capacity)
        for (position, key) in keys.enumerated() { place(key, UInt32(position)) }
    }

    private mutating func remove(_ key: String) {
        guard let (_, position) = find(key) else { return }
        let last = keys.count - 1
        if Int(position) != last {
            // Move the last element into the gap and point its bucket at the new position.
            let moved = keys[last]
            if let (movedBucket, _) = find(moved) { buckets[movedBucket] = position }
            keys.swapAt(Int(position), last)
            values.swapAt(Int(position), last)
        }
        keys.removeLast()
        values.removeLast()
        // Linear probing cannot leave holes in a probe chain: rebuild the table (removal is rare).
        rebuild(capacity: buckets.count)
    }

    /// The hash of `key`'s UTF-8 bytes.
    private static func hash(_ key: String) -> Int {
        var key = key
        return key.withUTF8 { bytes in
            var hasher = Hasher()
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            return hasher.finalize()
        }
    }

    /// Whether two keys have the same UTF-8 bytes.
    private static func same(_ lhs: String, _ rhs: String) -> Bool {
        lhs.utf8.count == rhs.utf8.count && lhs.utf8.elementsEqual(rhs.utf8)
    }
}
