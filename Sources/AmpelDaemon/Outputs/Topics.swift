import AmpelMessages
/// The topics the daemon writes, under one base topic (`ampel` by default).
///
/// One place builds every topic name, and reads back the ones the daemon reads again (its
/// retained states after a lost state), so the contract in `docs/topics.md` has one source.
struct Topics: Sendable, Hashable {
    /// The first level(s) of every topic the daemon writes, without a trailing slash.
    let base: String
    /// The level(s) under which `state` and `info` of this instance go (`<base>/bridge`).
    let bridge: String

    /// `<base>/device/` and `<base>/district/`, built once: the read-back of the retained
    /// states tests every message against them.
    private let devicePrefix: String
    private let districtPrefix: String

    init(base: String = "ampel", bridge: String? = nil) {
        self.base = base
        self.bridge = bridge ?? "\(base)/bridge"
        devicePrefix = "\(base)/device/"
        districtPrefix = "\(base)/district/"
    }

    func deviceState(_ key: String) -> String { "\(base)/device/\(key)/state" }
    func deviceAlert(_ key: String) -> String { "\(base)/device/\(key)/alert" }
    /// The device's alerts for Home Assistant's event entity (``Decision/HomeAssistantEvent``).
    func deviceEvent(_ key: String) -> String { "\(base)/device/\(key)/event" }
    func districtState(_ ags: String) -> String { "\(base)/district/\(ags)/state" }
    func districtPhase(_ ags: String) -> String { "\(base)/district/\(ags)/phase" }
    func districtAlert(_ ags: String) -> String { "\(base)/district/\(ags)/alert" }
    /// A federal state's (`00`: Germany's) indicators, retained (``StateReport``).
    func stateReport(_ id: String) -> String { "\(base)/states/\(id)" }
    /// The retained texts (`title`, `rules`, `always`) of one phase (`outside` too) in one
    /// language; the states name it in their `texts` member. A rule set's id may be any text:
    /// what cannot stand in one topic level (`/`, `+`, `#`, NUL) becomes `_`.
    func texts(ruleSet: String, phase: String, lang: String) -> String {
        let level = String(ruleSet.map { "/+#\u{0}".contains($0) ? "_" : $0 })
        return "\(base)/rules/\(level)/\(phase)/\(lang)"
    }
    var bridgeState: String { "\(bridge)/state" }
    var bridgeInfo: String { "\(bridge)/info" }

    /// Every device's topics (`<base>/device/#`: keys have one level or more).
    var devicesFilter: String { "\(base)/device/#" }
    /// Every district's phase (`<base>/district/+/phase`).
    var districtPhasesFilter: String { "\(base)/district/+/phase" }

    /// A topic only the client `clientID` subscribes to, to learn that the broker handled what
    /// came before on its connection; `purpose` keeps two such checks apart (a late answer to
    /// one must not end the other).
    func probe(clientID: String, purpose: String? = nil) -> String {
        "\(base)/bridge/probe/\(clientID)" + (purpose.map { "/\($0)" } ?? "")
    }

    /// Whether `topic` lies under `<base>/device/` or `<base>/district/`.
    func isDeviceOrDistrictTopic(_ topic: String) -> Bool {
        topic.utf8.starts(with: devicePrefix.utf8) || topic.utf8.starts(with: districtPrefix.utf8)
    }

    /// The device key of ``deviceState(_:)``'s topic; `nil` for any other topic or a key the
    /// daemon would refuse (``DeviceKey/isSafe(_:)``). By bytes, as keys are compared (decision 28).
    func deviceKey(stateTopic topic: String) -> String? {
        let prefix = devicePrefix.utf8, suffix = "/state".utf8
        let bytes = Array(topic.utf8)
        guard bytes.count > prefix.count + suffix.count, bytes.starts(with: prefix), bytes.reversed().starts(with: suffix.reversed()) else {
            return nil
        }
        let key = String(decoding: bytes[prefix.count..<(bytes.count - suffix.count)], as: UTF8.self)
        return DeviceKey.isSafe(key) ? key : nil
    }

    /// The district code of ``districtPhase(_:)``'s topic; `nil` for any other topic.
    func districtCode(phaseTopic topic: String) -> String? {
        let prefix = districtPrefix, suffix = "/phase"
        guard topic.hasPrefix(prefix), topic.hasSuffix(suffix) else { return nil }
        let ags = topic.dropFirst(prefix.count).dropLast(suffix.count)
        guard !ags.isEmpty, ags.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return String(ags)
    }
}
