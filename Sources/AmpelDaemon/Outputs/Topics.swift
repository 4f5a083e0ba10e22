import AmpelMQTT
/// The topics the daemon writes, under one base topic (`ampel` by default).
///
/// One place builds every topic name, so the contract in `docs/topics.md` has one source.
public struct Topics: Sendable, Hashable {
    /// The first level(s) of every topic the daemon writes, without a trailing slash.
    public let base: String

    public init(base: String = "ampel") {
        self.base = base
    }

    public func deviceState(_ key: String) -> String { "\(base)/device/\(key)/state" }
    public func deviceAlert(_ key: String) -> String { "\(base)/device/\(key)/alert" }
    public func districtState(_ ags: String) -> String { "\(base)/district/\(ags)/state" }
    public func districtPhase(_ ags: String) -> String { "\(base)/district/\(ags)/phase" }
    public func districtAlert(_ ags: String) -> String { "\(base)/district/\(ags)/alert" }
    /// The retained texts (`title`, `rules`, `always`) of one phase (`outside` too) in one
    /// language; the states name it in their `texts` member. A rule set's id may be any text:
    /// what cannot stand in one topic level (`/`, `+`, `#`, NUL) becomes `_`.
    public func texts(ruleSet: String, phase: String, lang: String) -> String {
        let level = String(ruleSet.map { "/+#\u{0}".contains($0) ? "_" : $0 })
        return "\(base)/rules/\(level)/\(phase)/\(lang)"
    }
    public var bridgeState: String { "\(base)/bridge/state" }
    public var bridgeInfo: String { "\(base)/bridge/info" }
}
