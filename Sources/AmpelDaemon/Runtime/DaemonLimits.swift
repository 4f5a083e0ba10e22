/// The daemon's bounds and timings, in one value (the tests shorten the tick).
struct DaemonLimits: Sendable {
    /// How often the state is written (if changed), `bridge/info` refreshed and the chores done.
    var tick: Duration = .seconds(1)
    /// Messages taken from the broker and not yet handled, at most (``IntakeGate``).
    var intake = 20_000
    /// Publishes the broker has not acknowledged, at most, before the loop handles the next
    /// message: libmosquitto holds each one in memory until then, and a burst that produces
    /// publishes faster than the broker takes them would otherwise grow memory without bound
    /// (docs/benchmarks.md, "Bursts"). The loop then waits until half are acknowledged.
    var outgoing = 2_000
    /// The longest single wait for the broker: ticks, data and a stop queued behind the next
    /// message are not held up longer by a broker that answers slowly or not at all.
    var outgoingWait: Duration = .seconds(1)
    /// How long a stop keeps handling the messages it has taken (the rest waits in the journal
    /// for the next start) and writing the snapshot: with the goodbye, well inside systemd's
    /// `TimeoutStopSec=20s` on a slow machine.
    var drain: Duration = .seconds(2)
    /// How long a stop waits for the broker to acknowledge `bridge/info` and `offline`.
    var goodbye: Duration = .seconds(3)
    /// How long a stop gives the webhooks to deliver what they hold (beside the snapshot and
    /// the goodbye, so it adds to the stop only when the goodbye is quicker).
    var webhookDrain: Duration = .seconds(2)
    /// How long the read of the broker's retained states may go without a message, and at most.
    var rebuildIdle: Duration = .seconds(10)
    var rebuildLimit: Duration = .seconds(120)
}
