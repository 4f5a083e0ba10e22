import AmpelCore

/// How many days a measured phase must last before a rule set puts it in force, and after
/// how many more days it takes effect (docs/rulesets.md, "Day counts").
///
/// The defaults (1, 1, 0, every day counted) switch on the day's value alone, as the
/// Bavarian sets do; `notbremse-2021` waits 3 days to enter, 5 working days to leave, and
/// acts "ab dem übernächsten Tag" (2 days later).
public struct DayCounts: Sendable, Hashable {
    /// Consecutive days above the phase in force before a stricter phase is scheduled.
    public let enterAfterDays: Int
    /// Counted days below the phase in force before a milder phase is scheduled.
    public let leaveAfterDays: Int
    /// Days from scheduling to taking effect; 0 takes effect on the day itself.
    public let delayDays: Int
    /// Whether only working days count towards ``leaveAfterDays``.
    public let workingDaysOnly: Bool
    /// Days that are no working days besides Sundays (public holidays).
    public let holidays: Set<Day>

    public init(enterAfterDays: Int = 1, leaveAfterDays: Int = 1, delayDays: Int = 0, workingDaysOnly: Bool = false,
                holidays: Set<Day> = []) {
        self.enterAfterDays = enterAfterDays
        self.leaveAfterDays = leaveAfterDays
        self.delayDays = delayDays
        self.workingDaysOnly = workingDaysOnly
        self.holidays = holidays
    }

    /// Switching on each day's value alone.
    public static let immediate = DayCounts()

    /// Whether the phase in force is always the measured one.
    public var isImmediate: Bool { enterAfterDays == 1 && leaveAfterDays == 1 && delayDays == 0 }

    /// A working day: Monday to Saturday and not a listed holiday (the law's "Werktag").
    public func isWorkingDay(_ day: Day) -> Bool {
        day.weekday != 0 && !holidays.contains(day)
    }

    /// Whether `day` counts towards ``leaveAfterDays``.
    public func countsTowardsLeaving(_ day: Day) -> Bool {
        !workingDaysOnly || isWorkingDay(day)
    }
}

/// The phase a district is under on one day: in force, measured, and since when.
public struct PhaseInForce: Sendable, Hashable {
    /// The phase whose rules apply (``DayCounts`` decide it).
    public let phase: PhaseID
    /// The phase the day's value alone gives.
    public let measured: PhaseID
    /// The first day of ``phase``, as far as the walked days reach back.
    public let since: Day

    public init(phase: PhaseID, measured: PhaseID, since: Day) {
        self.phase = phase
        self.measured = measured
        self.since = since
    }
}

extension DayCounts {
    /// Walks measured phases of publication days (oldest first) and answers the phase in
    /// force on each of them; see docs/rulesets.md for the rules, step by step.
    ///
    /// The walk starts with the measured phase of the first day in force (`since` that day),
    /// so one day alone gives the measured phase.
    public func walk(_ days: [(day: Day, measured: PhaseID)]) -> [PhaseInForce] {
        guard let first = days.first else { return [] }
        var inForce = first.measured
        var since = first.day
        var up: [PhaseID] = []
        var down: [PhaseID] = []
        var scheduled: (day: Day, phase: PhaseID)?
        var result: [PhaseInForce] = []
        result.reserveCapacity(days.count)
        for (day, measured) in days {
            if let change = scheduled, change.day <= day {
                inForce = change.phase
                since = change.day
                scheduled = nil
                up = []
                down = []
            } else if scheduled == nil {
                var target: PhaseID?
                if measured > inForce {
                    up.append(measured)
                    down = []
                    if up.count >= enterAfterDays { target = up.min() }
                } else if measured < inForce {
                    if countsTowardsLeaving(day) { down.append(measured) }
                    up = []
                    if down.count >= leaveAfterDays { target = down.max() }
                } else {
                    up = []
                    down = []
                }
                if let target {
                    up = []
                    down = []
                    let effective = day.adding(days: delayDays)
                    if delayDays == 0 {
                        inForce = target
                        since = effective
                    } else {
                        scheduled = (effective, target)
                    }
                }
            }
            result.append(PhaseInForce(phase: inForce, measured: measured, since: since))
        }
        return result
    }
}

extension Day {
    /// 0 Sunday, 1 Monday, … 6 Saturday.
    public var weekday: Int {
        // 1970-01-01 was a Thursday.
        ((daysSinceEpoch + 4) % 7 + 7) % 7
    }

    /// The day `days` days later (earlier for a negative count).
    public func adding(days: Int) -> Day {
        Day(daysSinceEpoch: daysSinceEpoch + days)
    }
}
