/// What a lamp follows: a district's phase (a fixed sign) or a device's state (a vehicle).
public enum LampFollow: Sendable, Hashable {
    /// `<base>/district/<ags>/phase`: the plain phase id, retained by the daemon.
    case district
    /// `<base>/device/<key>/state`: the device's signal object (JSON), retained.
    case device
}

/// Why a lamp's topics cannot be built.
public enum LampTopicError: Error, Sendable, Equatable {
    /// The district or device id is empty.
    case emptyID
    /// The base topic is empty.
    case emptyBase
    /// A topic contains a wildcard (`+`, `#`), a NUL byte or an empty level.
    case invalidTopic
}

/// The role a topic plays for the lamp.
public enum LampTopicRole: Sendable, Hashable {
    /// The followed topic: plain phase id (district) or signal JSON (device).
    case signal
    /// `<base>/district/<ags>/state`, read only for its `stale` flag (district lamps).
    case districtState
    /// `<base>/bridge/state`: `{"state":"online"|"offline"}`.
    case bridge
}

/// The topics one lamp subscribes to, as bytes (the board glue works on bytes).
///
/// A district lamp subscribes to the district's plain phase topic (the phase), its state
/// topic (only for `stale`; the plain phase id has no room for it) and the bridge state.
/// A device lamp needs only the device state (phase and stale in one message) and the
/// bridge state.
public struct LampTopics: Sendable, Hashable {
    public let follow: LampFollow
    /// The followed topic.
    public let signal: [UInt8]
    /// The district state topic, for district lamps.
    public let districtState: [UInt8]?
    /// `<base>/bridge/state`.
    public let bridge: [UInt8]

    /// Builds the topics from the UTF-8 bytes of the id and the base topic.
    ///
    /// - Parameters:
    ///   - follow: District (`id` is the AGS, one topic level) or device (`id` is the
    ///     device key, which may span levels, e.g. OwnTracks `user/device`).
    ///   - id: The AGS or device key.
    ///   - base: The daemon's base topic, `ampel` by default.
    public init<ID: Collection, Base: Collection>(
        follow: LampFollow, id: ID, base: Base
    ) throws(LampTopicError) where ID.Element == UInt8, Base.Element == UInt8 {
        guard !id.isEmpty else { throw .emptyID }
        guard !base.isEmpty else { throw .emptyBase }
        let slash = UInt8(ascii: "/")
        if follow == .district, id.contains(slash) { throw .invalidTopic }
        func join(_ parts: [[UInt8]]) -> [UInt8] {
            var topic: [UInt8] = []
            for (index, part) in parts.enumerated() {
                if index > 0 { topic.append(slash) }
                topic.append(contentsOf: part)
            }
            return topic
        }
        let base = Array(base)
        let id = Array(id)
        switch follow {
        case .district:
            signal = join([base, bytes("district"), id, bytes("phase")])
            districtState = join([base, bytes("district"), id, bytes("state")])
        case .device:
            signal = join([base, bytes("device"), id, bytes("state")])
            districtState = nil
        }
        bridge = join([base, bytes("bridge"), bytes("state")])
        self.follow = follow
        for topic in subscriptions where !LampTopics.isValidTopicName(topic) {
            throw .invalidTopic
        }
    }

    /// Builds the topics from strings.
    public init(follow: LampFollow, id: String, base: String = "ampel") throws(LampTopicError) {
        try self.init(follow: follow, id: id.utf8, base: base.utf8)
    }

    /// Every topic to subscribe to.
    public var subscriptions: [[UInt8]] {
        if let districtState { return [signal, districtState, bridge] }
        return [signal, bridge]
    }

    /// The role of an incoming message's topic, or `nil` for a topic the lamp ignores.
    public func role<Topic: Collection>(of topic: Topic) -> LampTopicRole? where Topic.Element == UInt8 {
        if topic.elementsEqual(signal) { return .signal }
        if let districtState, topic.elementsEqual(districtState) { return .districtState }
        if topic.elementsEqual(bridge) { return .bridge }
        return nil
    }

    /// A publishable topic name: no wildcards, no NUL, no empty level.
    static func isValidTopicName(_ topic: [UInt8]) -> Bool {
        var levelLength = 0
        for byte in topic {
            switch byte {
            case UInt8(ascii: "+"), UInt8(ascii: "#"), 0: return false
            case UInt8(ascii: "/"):
                if levelLength == 0 { return false }
                levelLength = 0
            default: levelLength += 1
            }
        }
        return levelLength > 0
    }
}

func bytes(_ literal: StaticString) -> [UInt8] {
    Array(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
}
