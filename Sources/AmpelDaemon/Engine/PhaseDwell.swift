/// How long a device must stay in a new phase before its alert goes out (`alerts.min_dwell`).
///
/// Measured on the fixes' own timestamps (`tst`), never on the daemon's clock, so that a
/// recorded track replays with the same alerts however fast it is fed in. A dwell is met only
/// at a fix: a device that enters a new phase and then says nothing more gets its alert with
/// its next fix there.
enum Dwell: Sendable, Hashable, CustomStringConvertible {
    /// At least this many seconds between the first fix in the new phase and the fix that confirms it.
    case seconds(Int)
    /// At least this many fixes in the new phase, the first one included.
    case fixes(Int)

    /// Today's behaviour: the first fix in a new phase sends its alert.
    static let none = Dwell.seconds(0)

    /// Whether a device that entered its phase at `since` (with `fixes` fixes in it so far)
    /// has stayed long enough at `tst`.
    func isMet(since: Int, tst: Int, fixes: Int) -> Bool {
        switch self {
        case .seconds(let seconds): tst - since >= seconds
        case .fixes(let count): fixes >= count
        }
    }

    var description: String {
        switch self {
        case .seconds(let seconds): "\(seconds)s"
        case .fixes(let count): count == 1 ? "1 fix" : "\(count) fixes"
        }
    }
}

/// A device that entered another phase which is not confirmed yet: its record still names the
/// district and phase last announced (``SignalEngine``, decision 30).
struct PendingPhase: Sendable, Hashable {
    /// The phase the device's latest fixes lie in.
    var phase: String
    /// The `tst` of the first fix in it.
    var since: Int
    /// Fixes in it so far.
    var fixes: Int
    /// Opened by a fix younger than `alerts.max_fix_age`: an end without an alert counts as a
    /// `dwell` suppression. One opened by an old fix was counted as `old-fix` when it opened.
    var fresh: Bool
}

/// Why a phase change sent no alert, counted in `bridge/info` (`alertsSuppressed`).
struct AlertSuppression: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    let rawValue: String
    init(rawValue: String) { self.rawValue = rawValue }
    var description: String { rawValue }
    static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// A fix older than `alerts.max_fix_age` lay in another phase: the crossing is history, the
    /// phase waits for a fresh fix.
    static let oldFix = AlertSuppression(rawValue: "old-fix")
    /// The device left a new phase before `alerts.min_dwell` was met.
    static let dwell = AlertSuppression(rawValue: "dwell")
}
