import AmpelMessages
import AmpelMQTT
@testable import AmpelDaemon
import AmpelData
import AmpelDomain
import Foundation
import Testing

/// The states' retained reports (`ampel/states/<id>`) under a set of state indicators: at the
/// start, again after a reconnect, again only when a day changes them, and emptied by the
/// first run under an incidence set.
@Suite struct StateReportTests {
    static let ruleSet = try! RuleSetCatalog.bundled("krankenhausampel-2021")

    static func publication(_ iso: String) throws -> Dataset {
        try BundledIndicatorSource(day: Day(iso: iso), region: ruleSet.region).load()
    }

    static func engine(_ dataset: Dataset, ruleSet: RuleSet = ruleSet, published: PublishedShape? = nil) -> (SignalEngine, [SignalEngine.Action]) {
        var settings = Fixtures.settings(discovery: false)
        settings.ruleSet = ruleSet
        settings.publishedShape = published
        var engine = SignalEngine(settings: settings, dataset: dataset, stale: false)
        let start = engine.event(.start)
        return (engine, start)
    }

    static func reports(_ actions: [SignalEngine.Action]) -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        for case .publish(let message, let kind) in actions where kind == .stateReport {
            #expect(message.retain && message.qos == .atLeastOnce)
            result[message.topic] = message.payload
        }
        return result
    }

    @Test("Germany and Bavaria at the start, the same bytes after a reconnect, again only when the next day changes them")
    func publishedRepublishedAndUpdated() throws {
        var (engine, start) = Self.engine(try Self.publication("2021-11-09"))
        let first = Self.reports(start)
        #expect(Set(first.keys) == ["ampel/states/00", "ampel/states/09"])
        let payload = try #require(first["ampel/states/09"])
        let bavaria = try #require(JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        #expect(bavaria["phase"] as? String == "red" && bavaria["dataDate"] as? String == "2021-11-09")
        #expect(Self.reports(engine.event(.reconnected)) == first)
        #expect(Self.reports(engine.event(.data(try Self.publication("2021-11-09"), stale: false))).isEmpty)
        let next = Self.reports(engine.event(.data(try Self.publication("2021-11-10"), stale: false)))
        #expect(Set(next.keys) == ["ampel/states/00", "ampel/states/09"])
        #expect(next != first)
    }

    @Test("a run under an incidence set empties the reports the last run retained, and records that it has none")
    func emptiedUnderAnIncidenceSet() throws {
        let (hospital, _) = Self.engine(try Self.publication("2021-11-09"))
        let shape = hospital.currentShape
        #expect(shape.states == ["ampel/states/00", "ampel/states/09"])
        let (_, start) = Self.engine(Fixtures.october, ruleSet: Fixtures.ruleSet, published: shape)
        let emptied = start.published.filter { $0.topic.hasPrefix("ampel/states/") }
        #expect(Set(emptied.map(\.topic)) == ["ampel/states/00", "ampel/states/09"])
        #expect(emptied.allSatisfy { $0.payload.isEmpty && $0.retain })
    }
}

/// `ampel replay` under a set of state indicators: every day of the bundled files.
@Suite struct StateIndicatorReplayTests {
    @Test("the Krankenhausampel replayed over 5 to 8 November 2021: green, yellow from the 6th (450 in force), red on the 8th")
    func replayDays() throws {
        let ruleSet = try RuleSetCatalog.bundled("krankenhausampel-2021")
        let feed = try ReplayFeed(from: Day(iso: "2021-11-05"), to: Day(iso: "2021-11-08"), daySeconds: .seconds(1), ruleSet: ruleSet)
        #expect(feed.days.map(\.iso) == ["2021-11-05", "2021-11-06", "2021-11-07", "2021-11-08"])
        let phases = try feed.days.indices.map { index -> String? in
            let dataset = try feed.state(index).dataset
            #expect(dataset.source == "replay" && dataset.date == feed.days[index])
            return try ruleSet.signal(for: #require(dataset["09162"]), dataDate: dataset.date, language: .en,
                                      course: dataset.courses["09162"]).phase
        }
        #expect(phases == ["green", "yellow", "yellow", "red"])
    }
}
