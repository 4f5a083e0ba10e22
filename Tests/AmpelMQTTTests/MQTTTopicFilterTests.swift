import Testing

@testable import AmpelMQTT

@Suite("Topic filters")
struct MQTTTopicFilterTests {
    @Test(arguments: [
        ("a/b/c", "a/b/c", true), ("a/b/c", "a/b", false), ("a/b", "a/b/c", false),
        ("a/+/c", "a/b/c", true), ("a/+/c", "a/b/d", false), ("a/+/c", "a//c", true), ("+", "a", true),
        ("+", "a/b", false), ("+/+", "/a", true), ("a/#", "a", true), ("a/#", "a/b/c", true), ("a/#", "ab", false),
        ("#", "a/b", true), ("#", "/", true), ("owntracks/+/+", "owntracks/alice/phone", true),
        ("owntracks/+/+", "owntracks/alice/phone/event", false),
        // $-topics are not matched by a leading wildcard.
        ("#", "$SYS/broker/uptime", false), ("+/broker/uptime", "$SYS/broker/uptime", false),
        ("$SYS/#", "$SYS/broker/uptime", true),
        // Shared subscriptions match like the filter inside them.
        ("$share/g/a/+", "a/b", true), ("$share/g/a/+", "b/b", false), ("$share/group/#", "x/y", true),
        // Topic names with wildcards never match.
        ("#", "a/+", false), ("a/#", "a/#", false),
    ])
    func matching(_ filter: String, _ topic: String, _ expected: Bool) throws {
        #expect(try MQTTTopicFilter(filter).matches(topic) == expected, "\(filter) vs \(topic)")
    }

    @Test func sharePrefixIsStripped() throws {
        let filter = try MQTTTopicFilter("$share/ampel/owntracks/#")
        #expect(filter.shareGroup == "ampel")
        #expect(filter.matchingFilter == "owntracks/#")
        #expect(try MQTTTopicFilter("a/b").shareGroup == nil)
    }

    @Test(arguments: ["", "a/#/b", "a#", "a/b#", "a+/b", "a/+b", "$share/g", "$share//a", "$share/g+/a", "$share/g/", "a\u{0}b"])
    func invalidFilters(_ filter: String) {
        #expect(throws: MQTTError.self) { try MQTTTopicFilter(filter) }
        do { _ = try MQTTTopicFilter(filter) } catch { #expect(error.code == .invalidTopic) }
    }
}
