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
    private let levels: [Substring]

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
        self.levels = levels
    }

    /// True if a message published on `topic` is delivered to a subscription with this filter.
    /// An invalid topic name (empty, or containing `+` or `#`) never matches.
    public func matches(_ topic: String) -> Bool {
        if topic.isEmpty || topic.contains("+") || topic.contains("#") { return false }
        var topicLevels = topic.split(separator: "/", omittingEmptySubsequences: false)[...]
        if topic.hasPrefix("$"), let first = levels.first, first == "+" || first == "#" { return false }
        for level in levels {
            if level == "#" { return true }
            guard let topicLevel = topicLevels.popFirst() else { return false }
            if level != "+" && level != topicLevel { return false }
        }
        return topicLevels.isEmpty
    }

    public var description: String { filter }

    /// Nil when `topic` may be published to, else the reason it may not.
    static func validateTopicName(_ topic: String) -> MQTTError? {
        func bad(_ why: String) -> MQTTError { MQTTError(code: .invalidTopic, message: "invalid topic '\(topic)': \(why)") }
        if topic.isEmpty { return bad("empty topic") }
        if topic.contains("+") || topic.contains("#") { return bad("wildcards are not allowed in a topic name") }
        if topic.contains("\0") { return bad("contains a NUL character") }
        if topic.utf8.count > 65535 { return bad("longer than 65535 bytes") }
        return nil
    }
}
