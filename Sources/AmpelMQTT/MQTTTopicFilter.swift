/// A validated MQTT topic filter that can tell whether a topic matches it.
///
/// The daemon subscribes to several filters through one connection and routes each received
/// message by asking the filters in turn; this is that test, done the way the broker does it
/// (MQTT 3.1.1 / 5 section 4.7):
/// - `+` matches exactly one level, `#` (last level only) matches the parent and any number of
///   levels below it: `a/#` matches `a`, `a/b` and `a/b/c`.
/// - Topics beginning with `$` (e.g. `$SYS/...`) are not matched by a filter whose first level
///   is a wildcard.
/// - A shared subscription `$share/<group>/<filter>` matches like `<filter>`: the broker
///   delivers the plain topic, and the group only decides which member gets it.
public struct MQTTTopicFilter: Sendable, Hashable, CustomStringConvertible {
    /// The filter as given, including any `$share/<group>/` prefix.
    public let filter: String
    /// The share group of a `$share/<group>/...` filter, else nil.
    public let shareGroup: String?
    /// The filter that topics are matched against (without the share prefix).
    public let matchingFilter: String
    private let levels: [Level]

    private enum Level: Sendable, Hashable {
        case exact([UInt8])
        case single  // +
        case multi  // #

        var isExact: Bool {
            if case .exact = self { true } else { false }
        }
    }

    /// - Throws: ``MQTTError`` with code ``MQTTError/Code/invalidTopic`` when the filter breaks
    ///   the MQTT rules (empty, `#` not last, `+`/`#` sharing a level with other characters,
    ///   NUL characters, an empty or wildcard share group).
    public init(_ filter: String) throws(MQTTError) {
        func bad(_ why: String) -> MQTTError {
            MQTTError(code: .invalidTopic, message: "invalid topic filter '\(filter)': \(why)")
        }
        self.filter = filter
        var body = Substring(filter)
        if filter.hasPrefix("$share/") {
            let afterPrefix = body.dropFirst("$share/".count)
            guard let slash = afterPrefix.firstIndex(of: "/") else { throw bad("shared subscription needs $share/<group>/<filter>") }
            let group = afterPrefix[..<slash]
            if group.isEmpty { throw bad("empty share group") }
            if group.contains("+") || group.contains("#") { throw bad("share group must not contain wildcards") }
            shareGroup = String(group)
            body = afterPrefix[afterPrefix.index(after: slash)...]
        } else {
            shareGroup = nil
        }
        if body.isEmpty { throw bad("empty filter") }
        if body.utf8.count > 65535 { throw bad("longer than 65535 bytes") }
        if body.contains("\0") { throw bad("contains a NUL character") }
        let levels = body.split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in levels.enumerated() {
            if level.contains("#") && (level != "#" || index != levels.count - 1) {
                throw bad("'#' must be a whole level and the last one")
            }
            if level.contains("+") && level != "+" { throw bad("'+' must be a whole level") }
        }
        self.matchingFilter = String(body)
        self.levels = levels.map { $0 == "+" ? .single : $0 == "#" ? .multi : .exact(Array($0.utf8)) }
    }

    /// True if a message published on `topic` is delivered to a subscription with this filter.
    /// An invalid topic name (empty, or containing `+` or `#`) never matches.
    public func matches(_ topic: String) -> Bool {
        if topic.utf8.isEmpty || topic.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") }) { return false }
        var topic = topic
        return topic.withUTF8 { levelsMatched(by: $0) != nil }
    }

    /// The topic levels matched by the wildcards, joined by `/`; nil when `topic` does not match.
    ///
    /// `owntracks/+/+` on `owntracks/alice/phone` gives `alice/phone`; a filter without
    /// wildcards captures the empty string. Works on the UTF-8 bytes (levels compare byte for
    /// byte, as the broker compares them): a router calls it for every message.
    public func capture(_ topic: String) -> String? {
        var topic = topic
        return topic.withUTF8 { bytes in
            guard let pieces = levelsMatched(by: bytes) else { return nil }
            guard let first = pieces.first, let last = pieces.last else { return "" }
            // The captured levels are usually adjacent (`owntracks/+/+`): one slice of the topic.
            if zip(pieces, pieces.dropFirst()).allSatisfy({ $0.upperBound + 1 == $1.lowerBound }) {
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[first.lowerBound..<last.upperBound]), as: UTF8.self)
            }
            var joined: [UInt8] = []
            for (index, piece) in pieces.enumerated() {
                if index > 0 { joined.append(UInt8(ascii: "/")) }
                joined.append(contentsOf: bytes[piece])
            }
            return String(decoding: joined, as: UTF8.self)
        }
    }

    /// The byte ranges of the topic levels the wildcards matched, or nil when `bytes` does not match.
    private func levelsMatched(by bytes: UnsafeBufferPointer<UInt8>) -> [Range<Int>]? {
        let slash = UInt8(ascii: "/")
        // Topics starting with `$` are not matched by a wildcard in the first level.
        if bytes.first == UInt8(ascii: "$"), levels.first != nil, !levels[0].isExact { return nil }
        var start = 0  // where the next topic level starts; past `bytes.count` when none is left
        var pieces: [Range<Int>] = []
        func nextLevel() -> Range<Int>? {
            guard start <= bytes.count else { return nil }
            var end = start
            while end < bytes.count && bytes[end] != slash { end += 1 }
            defer { start = end + 1 }
            return start..<end
        }
        for level in levels {
            switch level {
            case .multi:
                // `a/#` also matches `a` itself (MQTT 3.1.1, 4.7.1.2).
                if start <= bytes.count { pieces.append(start..<bytes.count) }
                start = bytes.count + 1
            case .single:
                guard let range = nextLevel() else { return nil }
                pieces.append(range)
            case .exact(let expected):
                guard let range = nextLevel(), expected.elementsEqual(bytes[range]) else { return nil }
            }
        }
        return start > bytes.count ? pieces : nil  // otherwise the topic has more levels
    }

    public var description: String { filter }

    /// Nil when `topic` may be published to, else the reason it may not.
    static func validateTopicName(_ topic: String) -> MQTTError? {
        func bad(_ why: String) -> MQTTError { MQTTError(code: .invalidTopic, message: "invalid topic '\(topic)': \(why)") }
        if topic.isEmpty { return bad("empty topic") }
        if topic.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") }) {
            return bad("wildcards are not allowed in a topic name")
        }
        if topic.utf8.contains(0) { return bad("contains a NUL character") }
        if topic.utf8.count > 65535 { return bad("longer than 65535 bytes") }
        return nil
    }
}
