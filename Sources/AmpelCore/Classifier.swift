/// One end of a phase's incidence range.
public struct Bound: Sendable, Hashable {
    /// Incidence per 100,000 residents over 7 days.
    public var value: Double
    /// Whether `value` itself belongs to the range.
    public var inclusive: Bool

    public init(_ value: Double, inclusive: Bool) {
        self.value = value
        self.inclusive = inclusive
    }
}

/// The incidence range of one phase: `lower` absent means from 0, `upper` absent means unbounded.
public struct Band: Sendable, Hashable {
    public var phase: PhaseID
    public var lower: Bound?
    public var upper: Bound?

    public init(phase: PhaseID, lower: Bound?, upper: Bound?) {
        self.phase = phase
        self.lower = lower
        self.upper = upper
    }

    /// Whether `incidence` lies in this band.
    public func contains(_ incidence: Double) -> Bool {
        if let lower {
            if lower.inclusive ? incidence < lower.value : incidence <= lower.value { return false }
        }
        if let upper {
            if upper.inclusive ? incidence > upper.value : incidence >= upper.value { return false }
        }
        return true
    }
}

/// Why a list of bands cannot classify every incidence exactly once.
public enum BandsError: Error, Sendable, Hashable {
    case empty
    /// The first band must start at 0 (inclusive) or have no lower bound.
    case firstBandNotFromZero(PhaseID)
    /// The last band must have no upper bound.
    case lastBandBounded(PhaseID)
    /// A band's bound is NaN, infinite or negative.
    case invalidBound(PhaseID)
    /// A band whose lower bound is not below its upper bound.
    case emptyBand(PhaseID)
    /// A phase id used by two bands.
    case duplicatePhase(PhaseID)
    /// Incidences between the two bands belong to neither.
    case gap(PhaseID, PhaseID)
    /// Incidences at the border belong to both bands.
    case overlap(PhaseID, PhaseID)
    /// A band that is neither first nor last is open at one end.
    case openInnerBound(PhaseID)
}

/// Why an incidence cannot be classified.
public enum IncidenceError: Error, Sendable, Hashable {
    case notANumber
    case infinite
    case negative
}

/// Turns an incidence into a phase by a validated, ordered list of bands.
///
/// Validation guarantees that every finite, non-negative incidence falls into exactly one
/// band, so classification cannot fail for valid input. The same code serves every rule
/// set: adding a phase is a data change.
public struct Classifier: Sendable, Hashable {
    public let bands: [Band]

    /// Validates `bands` (mildest first) and keeps them.
    public init(bands: [Band]) throws(BandsError) {
        guard let first = bands.first, let last = bands.last else { throw .empty }
        var seen: [PhaseID] = []
        for band in bands {
            if seen.contains(band.phase) { throw .duplicatePhase(band.phase) }
            seen.append(band.phase)
            for bound in [band.lower, band.upper] {
                if let bound, !(bound.value.isFinite && bound.value >= 0) { throw .invalidBound(band.phase) }
            }
            if let lower = band.lower, let upper = band.upper {
                if lower.value > upper.value || (lower.value == upper.value && !(lower.inclusive && upper.inclusive)) {
                    throw .emptyBand(band.phase)
                }
            }
        }
        if let lower = first.lower, !(lower.value == 0 && lower.inclusive) { throw .firstBandNotFromZero(first.phase) }
        if last.upper != nil { throw .lastBandBounded(last.phase) }
        var index = 0
        while index + 1 < bands.count {
            let below = bands[index]
            let above = bands[index + 1]
            guard let upper = below.upper else { throw .openInnerBound(below.phase) }
            guard let lower = above.lower else { throw .openInnerBound(above.phase) }
            if upper.value < lower.value { throw .gap(below.phase, above.phase) }
            if upper.value > lower.value { throw .overlap(below.phase, above.phase) }
            if upper.inclusive && lower.inclusive { throw .overlap(below.phase, above.phase) }
            if !upper.inclusive && !lower.inclusive { throw .gap(below.phase, above.phase) }
            index += 1
        }
        self.bands = bands
    }

    /// The phase of `incidence`; NaN, infinite and negative values are errors, never a colour.
    public func classify(_ incidence: Double) throws(IncidenceError) -> PhaseID {
        if incidence.isNaN { throw .notANumber }
        if incidence.isInfinite { throw .infinite }
        if incidence < 0 { throw .negative }
        for band in bands where band.contains(incidence) {
            return band.phase
        }
        // Unreachable for validated bands; the strictest phase is the safe answer.
        return bands[bands.count - 1].phase
    }

    /// The phases in order, mildest first.
    public var phases: [PhaseID] { bands.map { $0.phase } }
}
