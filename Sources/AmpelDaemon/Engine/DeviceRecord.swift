import AmpelCore
import AmpelDomain

/// What the daemon remembers of one device; persisted across restarts.
struct DeviceRecord: Codable, Sendable, Hashable {
    var lat: Double
    var lon: Double
    /// The time of the fix (its `tst`, else when it arrived), seconds since 1970.
    var tst: Int
    /// The language the device's messages asked for, if any.
    var lang: String?
    /// The district the position lies in; `nil` outside Germany.
    var district: Signal.DistrictRef?
    /// The last phase published for the device (`green` … `darkred`, `outside`).
    var phase: String
    /// The data day and staleness of the last published state: a change republishes it.
    var dataDate: String
    var stale: Bool
    /// The last fix came over the OwnTracks input on `owntracks/<key>`, the key being
    /// `<user>/<device>`: the user's OwnTracks apps get the device's alerts as transitions
    /// (``OwnTracksNotices``). Kept with the record, so an alert that new data brings later
    /// reaches the phone too.
    var owntracks = false
    /// The device's first alert has gone out. `false` for a device seen so far only in fixes
    /// older than `alerts.max_fix_age` (a phone's queue delivered late): its state shows where
    /// those put it, but nobody was told, so its next fresh fix alerts as a first sighting,
    /// whatever its phase. Persisted with the record: a restart in between must neither lose
    /// that alert nor send it twice.
    var announced = true
}

extension DeviceRecord {
    // A state file written before `owntracks` existed has no such member: the device is then
    // no OwnTracks phone until its next fix says so. The file writes it only when `true`.
    // Likewise `announced`, written only when `false`: every device of an older file was
    // announced at its first fix.
    private enum CodingKeys: String, CodingKey {
        case lat, lon, tst, lang, district, phase, dataDate, stale, owntracks, announced
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(lat: try c.decode(Double.self, forKey: .lat), lon: try c.decode(Double.self, forKey: .lon),
                  tst: try c.decode(Int.self, forKey: .tst), lang: try c.decodeIfPresent(String.self, forKey: .lang),
                  district: try c.decodeIfPresent(Signal.DistrictRef.self, forKey: .district),
                  phase: try c.decode(String.self, forKey: .phase), dataDate: try c.decode(String.self, forKey: .dataDate),
                  stale: try c.decode(Bool.self, forKey: .stale),
                  owntracks: try c.decodeIfPresent(Bool.self, forKey: .owntracks) ?? false,
                  announced: try c.decodeIfPresent(Bool.self, forKey: .announced) ?? true)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(lat, forKey: .lat)
        try c.encode(lon, forKey: .lon)
        try c.encode(tst, forKey: .tst)
        try c.encodeIfPresent(lang, forKey: .lang)
        try c.encodeIfPresent(district, forKey: .district)
        try c.encode(phase, forKey: .phase)
        try c.encode(dataDate, forKey: .dataDate)
        try c.encode(stale, forKey: .stale)
        if owntracks { try c.encode(true, forKey: .owntracks) }
        if !announced { try c.encode(false, forKey: .announced) }
    }
}

/// The engine's memory, as written to the state directory.
struct PersistedState: Codable, Sendable, Equatable {
    static let currentVersion = 1
    var version = PersistedState.currentVersion
    var devices = DeviceTable()
    /// The last published phase of each district of the region, by code.
    var districts: [String: String] = [:]
    /// Where in the journal this state was taken; `nil` in a file written before the journal.
    var journal: JournalMark?

    init(devices: DeviceTable = DeviceTable(), districts: [String: String] = [:], journal: JournalMark? = nil) {
        self.devices = devices
        self.districts = districts
        self.journal = journal
    }
}
