import AmpelMQTT
/// The topics the daemon writes, under one base topic (`ampel` by default).
///
/// One place builds every topic name, so the contract in `docs/topics.md` has one source.
public struct Topics: Sendable, Hashable {
    /// The first level(s) of every topic the daemon writes, without a trailing slash.
    public let base: String
    /// The level(s) under which `state` and `info` of this instance go (`<base>/bridge`).
    public let bridge: String

    public init(base: String = "ampel", bridge: String? = nil) {
        self.base = base
        self.bridge = bridge ?? "\(base)/bridge"
    }

    public func deviceState(_ key: String) -> String { "\(base)/device/\(key)/state" }
    public func deviceAlert(_ key: String) -> String { "\(base)/device/\(key)/alert" }
    public func districtState(_ ags: String) -> String { "\(base)/district/\(ags)/state" }
    public func districtPhase(_ ags: String) -> String { "\(base)/district/\(ags)/phase" }
    public func districtAlert(_ ags: String) -> String { "\(base)/district/\(ags)/alert" }
    public var bridgeState: String { "\(bridge)/state" }
    public var bridgeInfo: String { "\(bridge)/info" }
}
