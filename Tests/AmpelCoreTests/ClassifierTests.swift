import AmpelCore
import Testing

/// The Bavarian bounds exactly as the rules read them, in the Embedded-safe core.
@Suite struct ClassifierTests {
    static let bavaria: [Band] = [
        Band(phase: .green, lower: nil, upper: Bound(35, inclusive: false)),
        Band(phase: .yellow, lower: Bound(35, inclusive: true), upper: Bound(50, inclusive: true)),
        Band(phase: .red, lower: Bound(50, inclusive: false), upper: Bound(100, inclusive: true)),
        Band(phase: .darkred, lower: Bound(100, inclusive: false), upper: nil),
    ]

    @Test(arguments: [
        (0.0, PhaseID.green), (34.999, .green), (35, .yellow), (50, .yellow), (50.0001, .red),
        (100, .red), (100.0001, .darkred), (1651, .darkred),
    ])
    func bavarianBounds(incidence: Double, expected: PhaseID) throws {
        let classifier = try Classifier(bands: Self.bavaria)
        #expect(try classifier.classify(incidence) == expected)
    }

    @Test func invalidIncidencesAreErrorsNotColours() throws {
        let classifier = try Classifier(bands: Self.bavaria)
        #expect(throws: IncidenceError.notANumber) { try classifier.classify(.nan) }
        #expect(throws: IncidenceError.infinite) { try classifier.classify(.infinity) }
        #expect(throws: IncidenceError.negative) { try classifier.classify(-0.1) }
    }

    @Test func gapsAndOverlapsAreRejected() {
        let gap = [
            Band(phase: .green, lower: nil, upper: Bound(35, inclusive: false)),
            Band(phase: .yellow, lower: Bound(36, inclusive: true), upper: nil),
        ]
        #expect(throws: BandsError.gap(.green, .yellow)) { try Classifier(bands: gap) }
        let bothExclusive = [
            Band(phase: .green, lower: nil, upper: Bound(35, inclusive: false)),
            Band(phase: .yellow, lower: Bound(35, inclusive: false), upper: nil),
        ]
        #expect(throws: BandsError.gap(.green, .yellow)) { try Classifier(bands: bothExclusive) }
        let bothInclusive = [
            Band(phase: .green, lower: nil, upper: Bound(35, inclusive: true)),
            Band(phase: .yellow, lower: Bound(35, inclusive: true), upper: nil),
        ]
        #expect(throws: BandsError.overlap(.green, .yellow)) { try Classifier(bands: bothInclusive) }
        let crossing = [
            Band(phase: .green, lower: nil, upper: Bound(40, inclusive: false)),
            Band(phase: .yellow, lower: Bound(35, inclusive: true), upper: nil),
        ]
        #expect(throws: BandsError.overlap(.green, .yellow)) { try Classifier(bands: crossing) }
    }

    @Test func structuralErrors() {
        #expect(throws: BandsError.empty) { try Classifier(bands: []) }
        #expect(throws: BandsError.lastBandBounded(.green)) {
            try Classifier(bands: [Band(phase: .green, lower: nil, upper: Bound(35, inclusive: false))])
        }
        #expect(throws: BandsError.firstBandNotFromZero(.green)) {
            try Classifier(bands: [Band(phase: .green, lower: Bound(1, inclusive: true), upper: nil)])
        }
        #expect(throws: BandsError.duplicatePhase(.green)) {
            try Classifier(bands: [
                Band(phase: .green, lower: nil, upper: Bound(35, inclusive: false)),
                Band(phase: .green, lower: Bound(35, inclusive: true), upper: nil),
            ])
        }
        #expect(throws: BandsError.invalidBound(.yellow)) {
            try Classifier(bands: [
                Band(phase: .green, lower: nil, upper: Bound(35, inclusive: false)),
                Band(phase: .yellow, lower: Bound(.nan, inclusive: true), upper: nil),
            ])
        }
    }
}

@Suite struct PhaseAndColourTests {
    @Test func phaseIdsRoundTrip() {
        for phase in PhaseID.allCases {
            #expect(PhaseID(phase.id) == phase)
            #expect(PhaseID(utf8: Array(phase.id.utf8)) == phase)
        }
        #expect(PhaseID("Green") == nil)
        #expect(PhaseID("green ") == nil)
        #expect(PhaseID("") == nil)
        #expect(PhaseID("outside") == nil)
        #expect(OutsideMarker.matches(utf8: Array("outside".utf8)))
    }

    @Test func phasesAreOrderedMildestFirst() {
        #expect(PhaseID.allCases.sorted() == [.green, .yellow, .red, .darkred])
    }

    @Test func coloursParseAndFormat() {
        #expect(RGB(hex: "#8b0000") == RGB(red: 0x8B, green: 0, blue: 0))
        #expect(RGB(hex: "#00A651")?.hex == "#00A651")
        for bad in ["", "#", "00A651", "#00A65", "#00A6511", "#00G651", " #00A651"] {
            #expect(RGB(hex: bad) == nil, "\(bad) must be rejected")
        }
    }
}
