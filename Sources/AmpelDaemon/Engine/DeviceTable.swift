import AmpelDomain

/// Every device the daemon knows, in about 80 bytes each (100,000 devices: about 8 MB).
///
/// A fleet of 100,000 devices is the daemon's largest memory item. Held as
/// `[String: DeviceRecord]`, each entry carried five strings and an optional district of four
/// more (about 150 bytes inline, times the dictionary's spare capacity). Here an entry is the
/// key and a 40-byte ``Entry`` in a ``CompactMap``: position and time as they came, the rest as small numbers into
/// tables of the few distinct districts, phases and data days. The requested language is kept
/// as the ``Language`` it selects (`de-AT` → `de`), which is all the engine ever uses it for.
///
/// Reads and writes go through ``DeviceRecord`` values, so callers never see the packing.
struct DeviceTable: Sendable, Equatable, Codable, CustomStringConvertible, ExpressibleByDictionaryLiteral {
    struct Entry: Sendable, Hashable {
        var lat: Double
        var lon: Double
        var tst: Int
        /// Index into `districts`, or `Entry.none`.
        var district: UInt16
        /// Index into `texts`.
        var phase: UInt16
        /// Index into `texts`.
        var dataDate: UInt16
        /// 0: none; otherwise `Language.allCases` index + 1.
        var lang: UInt8
        /// ``stale``, ``owntracks`` and ``unannounced`` as bits: a second `Bool` would make the
        /// entry 33 bytes, laid out in 40.
        var flags: UInt8
        /// When the engine last published the device's state (its clock, seconds since 1970,
        /// up to 2106), 0 for not in this run: the `on_change` heartbeat. Not a part of the
        /// record and never persisted: after a restart each device's first fix publishes.
        var statePublished: UInt32 = 0

        static let none = UInt16.max
        static let stale: UInt8 = 1
        static let owntracks: UInt8 = 2
        /// Set when the record is not ``DeviceRecord/announced``: the common case, announced, is 0.
        static let unannounced: UInt8 = 4
    }

    /// Distinct values, each stored once and referred to by its position.
    struct Interned<Value: Hashable & Sendable>: Sendable {
        private(set) var values: [Value] = []
        private var positions: [Value: UInt16] = [:]

        subscript(position: UInt16) -> Value { values[Int(position)] }

        /// The position of `value`, added if new. Districts come from the geometry (about 430),
        /// phases are a handful and data days one per publication (65,535 are 179 years).
        mutating func position(of value: Value) -> UInt16 {
            if let position = positions[value] { return position }
            precondition(values.count < Int(Entry.none), "more than 65,534 distinct values of \(Value.self)")
            let position = UInt16(values.count)
            values.append(value)
            positions[value] = position
            return position
        }
    }

    private var entries = CompactMap<Entry>()
    private var districts = Interned<Signal.DistrictRef>()
    private var texts = Interned<String>()

    init() {}

    init(_ records: [String: DeviceRecord]) {
        for (key, record) in records { self[key] = record }
    }

    init(dictionaryLiteral elements: (String, DeviceRecord)...) {
        for (key, record) in elements { self[key] = record }
    }

    var count: Int { entries.count }

    /// The device keys in order.
    var sortedKeys: [String] { entries.keys.sorted() }
    /// The device keys in the table's own order: a copy-on-write copy, so taking it costs
    /// nothing until the table changes (a reconnect walks it in batches without sorting).
    var keys: [String] { entries.keys }

    /// Setting a record keeps the time its state was last published (``statePublished(_:)``).
    subscript(key: String) -> DeviceRecord? {
        get { entries[key].map(record) }
        set {
            let published = entries[key]?.statePublished ?? 0
            entries[key] = newValue.map {
                var entry = entry($0)
                entry.statePublished = published
                return entry
            }
        }
    }

    /// The record of `key` and when its state was last published in this run (`nil`: not yet).
    func recordAndStatePublished(_ key: String) -> (record: DeviceRecord, statePublished: Int?)? {
        guard let entry = entries[key] else { return nil }
        return (record(entry), entry.statePublished == 0 ? nil : Int(entry.statePublished))
    }

    /// Sets the record of `key` and when its state was last published (`nil`: not in this run).
    mutating func set(_ key: String, _ record: DeviceRecord, statePublished: Int?) {
        var entry = entry(record)
        entry.statePublished = statePublished.map { UInt32(clamping: max(1, $0)) } ?? 0
        entries[key] = entry
    }

    /// The table as a new run starts with it: no state published yet.
    func forNewRun() -> DeviceTable {
        var table = self
        table.entries.updateValues { $0.statePublished = 0 }
        return table
    }

    /// The keys of the devices whose last fix is older than `tst` (seconds since 1970), in
    /// byte order; reads the packed entries only, so a scan of 1,000,000 devices builds no record.
    func keys(heardBefore tst: Int) -> [String] {
        var found: [String] = []
        for (key, entry) in zip(entries.keys, entries.values) where entry.tst < tst { found.append(key) }
        return found.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// Calls `body` for every device, in no particular order.
    func forEach(_ body: (String, DeviceRecord) throws -> Void) rethrows {
        for (key, entry) in zip(entries.keys, entries.values) { try body(key, record(entry)) }
    }

    /// The devices as plain records (for tests and the file format).
    var records: [String: DeviceRecord] {
        // Two keys that differ only in Unicode normalization are one `String` key here: the later
        // one wins (the table itself keeps both, see ``CompactMap``).
        Dictionary(zip(entries.keys, entries.values.map(record)), uniquingKeysWith: { _, later in later })
    }

    /// Equal when both hold the same keys (by bytes, as the table compares them) with equal records.
    static func == (lhs: Self, rhs: Self) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var equal = true
        lhs.forEach { key, record in if equal, rhs[key] != record { equal = false } }
        return equal
    }

    var description: String { "\(count) devices" }

    init(from decoder: any Decoder) throws {
        self.init(try [String: DeviceRecord](from: decoder))
    }

    func encode(to encoder: any Encoder) throws {
        try records.encode(to: encoder)
    }

    // MARK: Packing

    private func record(_ entry: Entry) -> DeviceRecord {
        DeviceRecord(lat: entry.lat, lon: entry.lon, tst: entry.tst,
                     lang: entry.lang == 0 ? nil : Language.allCases[Int(entry.lang) - 1].rawValue,
                     district: entry.district == Entry.none ? nil : districts[entry.district],
                     phase: texts[entry.phase], dataDate: texts[entry.dataDate], stale: entry.flags & Entry.stale != 0,
                     owntracks: entry.flags & Entry.owntracks != 0, announced: entry.flags & Entry.unannounced == 0)
    }

    private mutating func entry(_ record: DeviceRecord) -> Entry {
        let lang = record.lang.map { Language(requested: $0) }
        return Entry(lat: record.lat, lon: record.lon, tst: record.tst,
                     district: record.district.map { districts.position(of: $0) } ?? Entry.none,
                     phase: texts.position(of: record.phase), dataDate: texts.position(of: record.dataDate),
                     lang: lang.map { UInt8(Language.allCases.firstIndex(of: $0)! + 1) } ?? 0,
                     flags: (record.stale ? Entry.stale : 0) | (record.owntracks ? Entry.owntracks : 0)
                        | (record.announced ? 0 : Entry.unannounced))
    }
}
