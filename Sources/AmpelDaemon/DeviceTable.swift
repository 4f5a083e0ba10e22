import AmpelDomain

/// Every device the daemon knows, in about 50 bytes each.
///
/// A fleet of 100,000 devices is the daemon's largest memory item. Held as
/// `[String: DeviceRecord]`, each entry carried five strings and an optional district of four
/// more (about 150 bytes inline, times the dictionary's spare capacity). Here an entry is the
/// key and a 32-byte ``Entry``: position and time as they came, the rest as small numbers into
/// tables of the few distinct districts, phases and data days. The requested language is kept
/// as the ``Language`` it selects (`de-AT` → `de`), which is all the engine ever uses it for.
///
/// Reads and writes go through ``DeviceRecord`` values, so callers never see the packing.
public struct DeviceTable: Sendable, Equatable, Codable, CustomStringConvertible, ExpressibleByDictionaryLiteral {
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
        var stale: Bool

        static let none = UInt16.max
    }

    private var entries: [String: Entry] = [:]
    private var districts: [Signal.DistrictRef] = []
    private var districtIndex: [Signal.DistrictRef: UInt16] = [:]
    private var texts: [String] = []
    private var textIndex: [String: UInt16] = [:]

    public init() {}

    public init(_ records: [String: DeviceRecord]) {
        for (key, record) in records { self[key] = record }
    }

    public init(dictionaryLiteral elements: (String, DeviceRecord)...) {
        for (key, record) in elements { self[key] = record }
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    /// The device keys in order.
    public var sortedKeys: [String] { entries.keys.sorted() }

    public subscript(key: String) -> DeviceRecord? {
        get { entries[key].map(record) }
        set { entries[key] = newValue.map { entry($0) } }
    }

    /// Calls `body` for every device, in no particular order.
    public func forEach(_ body: (String, DeviceRecord) throws -> Void) rethrows {
        for (key, entry) in entries { try body(key, record(entry)) }
    }

    /// The devices as plain records (for tests and the file format).
    public var records: [String: DeviceRecord] { entries.mapValues(record) }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.records == rhs.records }

    public var description: String { "\(count) devices" }

    public init(from decoder: any Decoder) throws {
        self.init(try [String: DeviceRecord](from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try records.encode(to: encoder)
    }

    // MARK: Packing

    private func record(_ entry: Entry) -> DeviceRecord {
        DeviceRecord(lat: entry.lat, lon: entry.lon, tst: entry.tst,
                     lang: entry.lang == 0 ? nil : Language.allCases[Int(entry.lang) - 1].rawValue,
                     district: entry.district == Entry.none ? nil : districts[Int(entry.district)],
                     phase: texts[Int(entry.phase)], dataDate: texts[Int(entry.dataDate)], stale: entry.stale)
    }

    private mutating func entry(_ record: DeviceRecord) -> Entry {
        let lang = record.lang.map { Language(requested: $0) }
        return Entry(lat: record.lat, lon: record.lon, tst: record.tst,
                     district: record.district.map { intern($0) } ?? Entry.none,
                     phase: intern(record.phase), dataDate: intern(record.dataDate),
                     lang: lang.map { UInt8(Language.allCases.firstIndex(of: $0)! + 1) } ?? 0,
                     stale: record.stale)
    }

    /// Districts come from the geometry (about 430) and the data; never near 65,535.
    private mutating func intern(_ district: Signal.DistrictRef) -> UInt16 {
        if let index = districtIndex[district] { return index }
        precondition(districts.count < Int(Entry.none), "more than 65,534 distinct districts")
        let index = UInt16(districts.count)
        districts.append(district)
        districtIndex[district] = index
        return index
    }

    /// Phases (a handful) and data days (one per publication: 65,535 are 179 years).
    private mutating func intern(_ text: String) -> UInt16 {
        if let index = textIndex[text] { return index }
        precondition(texts.count < Int(UInt16.max), "more than 65,535 distinct phases and data days")
        let index = UInt16(texts.count)
        texts.append(text)
        textIndex[text] = index
        return index
    }
}
