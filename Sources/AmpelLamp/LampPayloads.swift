import AmpelCore

/// A signal the lamp can show: a phase, or the `outside` marker.
public enum LampSignal: Sendable, Hashable {
    case phase(PhaseID)
    case outside

    /// Parses `green`, `yellow`, `red`, `darkred` or `outside`; anything else is `nil`.
    public init?<Bytes: Collection>(utf8 bytes: Bytes) where Bytes.Element == UInt8 {
        if let phase = PhaseID(utf8: bytes) {
            self = .phase(phase)
        } else if OutsideMarker.matches(utf8: bytes) {
            self = .outside
        } else {
            return nil
        }
    }
}

/// The readings of the payloads a lamp receives; each answers `nil` for anything it does
/// not fully understand, so garbage cannot change what the lamp shows.
public enum LampPayload {
    /// A plain phase id (`ampel/district/<ags>/phase`), ASCII white space around it allowed.
    public static func plainSignal<Bytes: RandomAccessCollection>(_ payload: Bytes) -> LampSignal?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        var start = payload.startIndex
        var end = payload.endIndex
        while start < end, isSpace(payload[start]) { start += 1 }
        while end > start, isSpace(payload[end - 1]) { end -= 1 }
        guard end - start <= 16 else { return nil }
        return LampSignal(utf8: payload[start..<end])
    }

    /// The phase and stale flag of a signal object (`ampel/device/<key>/state`).
    ///
    /// Only the top-level `"phase"` (a known id or `outside`) and `"stale"` (a boolean,
    /// `false` when absent) are read. A document that is not valid JSON, has no usable
    /// `"phase"`, has `"stale"` of another type, or repeats either key answers `nil`.
    public static func signalObject<Bytes: RandomAccessCollection>(_ payload: Bytes) -> (signal: LampSignal, stale: Bool)?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        var phase: JSONValue? = nil
        var stale: JSONValue? = nil
        var duplicate = false
        do {
            try JSONScanner.scanTopLevel(payload) { key, value in
                if key.equals("phase") {
                    if phase != nil { duplicate = true }
                    phase = value
                } else if key.equals("stale") {
                    if stale != nil { duplicate = true }
                    stale = value
                }
            }
        } catch {
            return nil
        }
        guard !duplicate, case .string(let text)? = phase, !text.isTruncated,
              let signal = LampSignal(utf8: text.utf8) else { return nil }
        switch stale {
        case nil: return (signal, false)
        case .bool(let flag)?: return (signal, flag)
        default: return nil
        }
    }

    /// The `"stale"` flag of a district state object; `nil` when absent or unusable.
    public static func staleFlag<Bytes: RandomAccessCollection>(_ payload: Bytes) -> Bool?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        var stale: JSONValue? = nil
        var duplicate = false
        do {
            try JSONScanner.scanTopLevel(payload) { key, value in
                if key.equals("stale") {
                    if stale != nil { duplicate = true }
                    stale = value
                }
            }
        } catch {
            return nil
        }
        guard !duplicate, case .bool(let flag)? = stale else { return nil }
        return flag
    }

    /// Whether the bridge is online: `{"state":"online"}` or `{"state":"offline"}`.
    ///
    /// The bare words `online` and `offline` are accepted too (older bridges publish them).
    public static func bridgeOnline<Bytes: RandomAccessCollection>(_ payload: Bytes) -> Bool?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        if payload.elementsEqual(bytes("online")) { return true }
        if payload.elementsEqual(bytes("offline")) { return false }
        var state: JSONValue? = nil
        var duplicate = false
        do {
            try JSONScanner.scanTopLevel(payload) { key, value in
                if key.equals("state") {
                    if state != nil { duplicate = true }
                    state = value
                }
            }
        } catch {
            return nil
        }
        guard !duplicate, case .string(let text)? = state else { return nil }
        if text.equals("online") { return true }
        if text.equals("offline") { return false }
        return nil
    }
}

@inline(__always)
func isSpace(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
}
