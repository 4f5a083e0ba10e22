import AmpelCore
import AmpelData
import AmpelDomain
import AmpelPage
import Foundation

/// The statuses a dataset gives the Bavarian districts under a rule set, computed here the
/// way the engine does (classify the incidence; outside the region is `outside`), so the
/// renderers are checked against the data, not against colours written into the test.
func statuses(_ dataset: Dataset, ruleSet: RuleSet, region: Region = .bavaria) throws -> [String: DistrictStatus] {
    var out: [String: DistrictStatus] = [:]
    for (ags, entry) in dataset.districts where ags.hasPrefix("09") {
        if region.contains(ags: ags) {
            let rules = try ruleSet.measure(entry, on: dataset.date).phase
            out[ags] = DistrictStatus(ags: ags, name: entry.district.name, incidence: entry.incidence, phase: .phase(rules.id), color: rules.color)
        } else {
            out[ags] = DistrictStatus(ags: ags, name: entry.district.name, incidence: nil, phase: .outside, color: ruleSet.outside.color)
        }
    }
    return out
}

/// The `<path …>` elements of a map: their attributes by name.
func mapPaths(_ svg: String) throws -> [[String: String]] {
    let element = try Regex(#"<path ([^>]*)>"#)
    let attribute = try Regex(#"([a-z-]+)="([^"]*)""#)
    return svg.matches(of: element).map { match in
        let text = String(svg[match.range])
        var attributes: [String: String] = [:]
        for a in text.matches(of: attribute) {
            if let name = a.output[1].substring, let value = a.output[2].substring { attributes[String(name)] = String(value) }
        }
        return attributes
    }
}

/// How often `needle` occurs in `haystack`.
func occurrences(of needle: String, in haystack: String) -> Int {
    haystack.components(separatedBy: needle).count - 1
}
