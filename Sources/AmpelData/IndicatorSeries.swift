import AmpelDomain

/// One state-level indicator's daily values per region, as published.
///
/// Dense by day: every region holds one entry per day from ``firstDay`` through ``lastDay``,
/// `nil` where the file has no value (`NA`), so a day's value is an index, not a search.
public struct IndicatorSeries: Sendable, Hashable {
    /// The indicator (level ``IndicatorLevel/state``).
    public let key: IndicatorKey
    /// The day of index 0.
    public let firstDay: Day
    /// The day of the last index.
    public let lastDay: Day
    /// Region id (`00` Germany, `01`...`16`) -> one entry per day from ``firstDay`` through
    /// ``lastDay``; `nil` where the file has no value.
    public let values: [String: [Double?]]

    /// A `lastDay` before `firstDay` is taken as `firstDay`; each region's entries are cut or
    /// padded with `nil` to the days from `firstDay` through `lastDay`, so that an index is
    /// always a day of the range.
    public init(key: IndicatorKey, firstDay: Day, lastDay: Day, values: [String: [Double?]]) {
        let last = max(firstDay, lastDay)
        let count = last.daysSinceEpoch - firstDay.daysSinceEpoch + 1
        self.key = key
        self.firstDay = firstDay
        self.lastDay = last
        self.values = values.mapValues { (entries: [Double?]) -> [Double?] in
            if entries.count == count { return entries }
            if entries.count > count { return Array(entries.prefix(count)) }
            return entries + [Double?](repeating: nil, count: count - entries.count)
        }
    }

    /// The number of days from ``firstDay`` through ``lastDay``.
    public var dayCount: Int { lastDay.daysSinceEpoch - firstDay.daysSinceEpoch + 1 }

    /// The regions with entries, sorted (`00` first).
    public var regions: [String] { values.keys.sorted() }

    /// The value of `region` on `day`; `nil` outside the range, for an unknown region, or where
    /// the file has no value.
    public func value(region: String, on day: Day) -> Double? {
        guard let entries = values[region] else { return nil }
        let index = day.daysSinceEpoch - firstDay.daysSinceEpoch
        return entries.indices.contains(index) ? entries[index] : nil
    }

    /// The newest day on or before `day`, at most `maxAge` days earlier, for which `region` has
    /// a value: a file's newest day may lie before the day asked for, and a value may be `NA`,
    /// so "today's" value is the newest one not too old.
    public func latest(region: String, onOrBefore day: Day, maxAge: Int) -> (day: Day, value: Double)? {
        guard maxAge >= 0, let entries = values[region] else { return nil }
        let base = firstDay.daysSinceEpoch
        let target = day.daysSinceEpoch - base
        guard target >= 0 else { return nil }
        // max(0, target - maxAge), written so that a huge maxAge cannot overflow.
        let oldest = maxAge >= target ? 0 : target - maxAge
        let newest = min(target, entries.count - 1)
        guard newest >= oldest else { return nil }
        for index in stride(from: newest, through: oldest, by: -1) {
            if let value = entries[index] { return (Day(daysSinceEpoch: base + index), value) }
        }
        return nil
    }

    /// This series with the values of `kept` where `kept` has one: a value once published is
    /// never changed ("kept as published", docs/data.md), whatever a later file says for its day.
    ///
    /// The result spans both ranges and holds the regions of both (a day or region a newer file
    /// drops is not lost); a day `kept` has no value for (`NA`, or not yet in it) takes this
    /// series' value. `changedValues` counts the values of `kept` this series gives differently,
    /// `NA` included, for the days and regions it covers. A `kept` of another indicator is not
    /// this one's past and is ignored.
    public func keepingPublished(_ kept: IndicatorSeries?) -> (series: IndicatorSeries, changedValues: Int) {
        guard let kept, kept.key == key else { return (self, 0) }
        let first = min(firstDay, kept.firstDay)
        let last = max(lastDay, kept.lastDay)
        let count = last.daysSinceEpoch - first.daysSinceEpoch + 1
        // Where each series' index 0 falls in the merged range.
        let ownOffset = firstDay.daysSinceEpoch - first.daysSinceEpoch
        let keptOffset = kept.firstDay.daysSinceEpoch - first.daysSinceEpoch
        var merged: [String: [Double?]] = [:]
        var changed = 0
        for region in Set(values.keys).union(kept.values.keys) {
            let own = values[region]
            let old = kept.values[region]
            var entries = [Double?](repeating: nil, count: count)
            for index in 0..<count {
                let ownIndex = index - ownOffset
                let keptIndex = index - keptOffset
                // `.some(nil)`: the day is in this series, without a value.
                var ownValue: Double?? = nil
                if let own, own.indices.contains(ownIndex) { ownValue = .some(own[ownIndex]) }
                var keptValue: Double? = nil
                if let old, old.indices.contains(keptIndex) { keptValue = old[keptIndex] }
                if let keptValue {
                    entries[index] = keptValue
                    // Only a day this series covers can give a held value differently.
                    if case .some(let newValue) = ownValue, newValue != keptValue { changed += 1 }
                } else if case .some(let newValue) = ownValue {
                    entries[index] = newValue
                }
            }
            merged[region] = entries
        }
        return (IndicatorSeries(key: key, firstDay: first, lastDay: last, values: merged), changed)
    }
}

/// What one of the state-level indicator files holds: its series and how many rows it read.
public struct IndicatorTable: Sendable, Hashable {
    /// The file's series, one per indicator it provides.
    public let series: [IndicatorSeries]
    /// Data rows read (the header not counted), the skipped ones included.
    public let rows: Int
    /// Rows read but not part of a series (the hospitalisation file's other age groups).
    public let skippedRows: Int

    public init(series: [IndicatorSeries], rows: Int, skippedRows: Int) {
        self.series = series
        self.rows = rows
        self.skippedRows = skippedRows
    }

    /// The series of `key`, if the file provides it.
    public subscript(key: IndicatorKey) -> IndicatorSeries? {
        series.first { $0.key == key }
    }
}
