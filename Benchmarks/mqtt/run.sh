#!/usr/bin/env bash
# Ampel MQTT benchmark: our Swift client (AmpelMQTT) against a plain C libmosquitto client,
# publish and receive throughput at QoS 0 and 1, through the same mosquitto, in one run.
#
#   Benchmarks/mqtt/run.sh            # defaults below; override with env vars
#   RUNS=3 COUNT0=100000 Benchmarks/mqtt/run.sh
#   BASELINE_BIN=$(Benchmarks/build-baseline.sh REV) Benchmarks/mqtt/run.sh   # before/after
#
# With BASELINE_BIN, the Swift client of an earlier revision (its AmpelBenchmarks binary) runs
# in the same rotation, and a before/after table compares the two builds row by row.
#
# Prints a Markdown section (machine, command, medians) and keeps raw lines in
# benchmarks-out/mqtt/. Needs: gcc, libmosquitto-dev, mosquitto, swift, python3.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS=${RUNS:-5}
COUNT0=${COUNT0:-300000}   # QoS 0 messages per run
COUNT1=${COUNT1:-100000}   # QoS 1 messages per run
SIZE=${SIZE:-128}          # payload bytes (an OwnTracks position is ~150)

out=benchmarks-out/mqtt
mkdir -p "$out"
gcc -O2 -Wall -o "$out/mqtt_bench" Benchmarks/mqtt/mqtt_bench.c -lmosquitto -lpthread
swift build -c release --static-swift-stdlib --product AmpelBenchmarks >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
swift_bench="$(swift build -c release --static-swift-stdlib --show-bin-path)/AmpelBenchmarks"
baseline_bench=""
if [ -n "${BASELINE_BIN:-}" ]; then
    baseline_bench="$BASELINE_BIN/AmpelBenchmarks"
    [ -x "$baseline_bench" ] || { echo "no AmpelBenchmarks in BASELINE_BIN=$BASELINE_BIN" >&2; exit 1; }
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
conf="$out/mosquitto.conf"
{
    echo "listener $port 127.0.0.1"
    echo "allow_anonymous true"
    echo "persistence false"
    # The broker defaults silently drop (1000 queued) or throttle (20 in flight) QoS 1
    # traffic, and without TCP_NODELAY each QoS 1 round trip waits ~40 ms.
    echo "max_queued_messages 0"
    echo "max_inflight_messages 0"
    echo "set_tcp_nodelay true"
    echo "log_dest stderr"
    echo "log_type error"
    echo "log_type warning"
    echo "log_type notice"
    echo "log_type information"
    [ "$(id -u)" = 0 ] && echo "user root"
} >"$conf"
mosquitto -c "$conf" 2>"$out/broker.log" &
broker=$!
trap 'kill "$broker" 2>/dev/null || true' EXIT
# Wait (bounded) until the broker says it is running.
for _ in $(seq 1 200); do
    grep -q ' running' "$out/broker.log" && break
    sleep 0.05
done
grep -q ' running' "$out/broker.log" || { echo "mosquitto did not start"; cat "$out/broker.log"; exit 1; }

results="$out/results.txt"
: >"$results"
for run in $(seq 1 "$RUNS"); do
    for qos in 0 1; do
        count=$COUNT0; [ "$qos" = 1 ] && count=$COUNT1
        # Alternate which implementation goes first so drift on a shared machine hits both.
        # swift-handler-normal: the same with both network threads in the normal scheduling class.
        if [ $((run % 2)) = 1 ]; then order="c swift swift-handler swift-handler-normal"; else order="swift-handler-normal swift-handler swift c"; fi
        # QoS 1 also as the C client publishes: all handed over at once (MQTTClient.enqueue).
        [ "$qos" = 1 ] && order="$order swift-enqueue"
        if [ -n "$baseline_bench" ]; then
            if [ $((run % 2)) = 1 ]; then order="baseline $order"; else order="$order baseline"; fi
        fi
        for impl in $order; do
            tag="r${run}q${qos}"
            if [ "$impl" = c ]; then
                "$out/mqtt_bench" 127.0.0.1 "$port" "$qos" "$count" "$SIZE" "$tag" | tee -a "$results"
            elif [ "$impl" = swift ]; then
                "$swift_bench" mqtt 127.0.0.1 "$port" "$qos" "$count" "$SIZE" "$tag" stream | tee -a "$results"
            elif [ "$impl" = swift-handler-normal ]; then
                "$swift_bench" mqtt 127.0.0.1 "$port" "$qos" "$count" "$SIZE" "${tag}n" handler normal | tee -a "$results"
            elif [ "$impl" = baseline ]; then
                # The earlier build, as the same three subscriber/publisher kinds.
                for kind in stream handler $([ "$qos" = 1 ] && echo enqueue); do
                    "$baseline_bench" mqtt 127.0.0.1 "$port" "$qos" "$count" "$SIZE" "${tag}b" "$kind" \
                        | sed 's/impl=/impl=baseline-/' | tee -a "$results"
                done
            elif [ "$impl" = swift-enqueue ]; then
                "$swift_bench" mqtt 127.0.0.1 "$port" "$qos" "$count" "$SIZE" "${tag}e" enqueue | tee -a "$results"
            else
                "$swift_bench" mqtt 127.0.0.1 "$port" "$qos" "$count" "$SIZE" "${tag}h" handler | tee -a "$results"
            fi
        done
    done
done

python3 - "$results" "$RUNS" "$SIZE" <<'PY'
import statistics, subprocess, sys, platform
path, runs, size = sys.argv[1], sys.argv[2], sys.argv[3]
rows = {}
for line in open(path):
    fields = dict(kv.split("=", 1) for kv in line.split())
    rows.setdefault((fields["impl"], int(fields["qos"])), []).append(fields)
def median(impl, qos, key):
    return statistics.median(float(r[key]) for r in rows[(impl, qos)])
def sh(cmd):
    try: return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception: return "?"
cpu = sh("lscpu | sed -n 's/^Model name: *//p'") or platform.processor()
print()
print("Machine: %s, %s cores, %s; %s; %s; libmosquitto/mosquitto %s" % (
    cpu, sh("nproc"), platform.platform(), sh("swift --version 2>&1 | head -1"),
    sh("gcc --version | head -1"), sh("mosquitto -h | sed -n 's/mosquitto version //p' | head -1")))
print("Command: `Benchmarks/mqtt/run.sh` (RUNS=%s, %s-byte payloads, medians of %s runs)" % (runs, size, runs))
print()
print("| QoS | Swift client (subscriber; publisher) | messages | C publish/s | Swift publish/s | Swift/C | C receive/s | Swift receive/s | Swift/C |")
print("|---|---|---|---|---|---|---|---|---|")
for qos in (0, 1):
    impls = (("swift", "`messages` (AsyncSequence); `publish`"), ("swift-handler", "message handler; `publish`"))
    if ("swift-handler-normal", qos) in rows:
        impls += (("swift-handler-normal", "message handler; `publish`; network threads SCHED_OTHER"),)
    if qos == 1 and ("swift-enqueue", 1) in rows:
        impls += (("swift-enqueue", "message handler; publisher `enqueue` + last `publish`"),)
    for impl, name in impls:
        count = rows[("c", qos)][0]["count"]
        cp, sp = median("c", qos, "publish_rate"), median(impl, qos, "publish_rate")
        cr, sr = median("c", qos, "receive_rate"), median(impl, qos, "receive_rate")
        print("| %d | %s | %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |" % (qos, name, count, cp, sp, sp / cp, cr, sr, sr / cr))
print()
print("QoS 0, CPU time of the publishing thread per publish call (the caller's cost; the publish/s")
print("above also depend on how the scheduler shares the two cores with the network threads and the broker):")
print()
print("| publisher | µs per call (median) | runs | Swift/C |")
print("|---|---|---|---|")
c_cpu = median("c", 0, "publish_cpu_us")
for impl, name in (("c", "C (libmosquitto)"), ("swift", "Swift, `messages` subscriber"), ("swift-handler", "Swift, handler subscriber"),
                   ("swift-handler-normal", "Swift, handler subscriber, SCHED_OTHER")):
    if (impl, 0) not in rows: continue
    values = [float(r["publish_cpu_us"]) for r in rows[(impl, 0)] if r.get("publish_cpu_us", "nan") != "nan"]
    if values:
        m = statistics.median(values)
        print("| %s | %.3f | %s | %.2f |" % (name, m, " ".join("%.3f" % v for v in values), m / c_cpu))
if ("baseline-swift", 0) in rows:
    print()
    print("Before/after, this build against BASELINE_BIN in the same run (1.00 = unchanged):")
    print()
    print("| QoS | Swift client | baseline publish/s | publish/s | after/before | baseline receive/s | receive/s | after/before |")
    print("|---|---|---|---|---|---|---|---|")
    for qos in (0, 1):
        for impl, name in (("swift", "`messages`; `publish`"), ("swift-handler", "handler; `publish`"), ("swift-enqueue", "handler; `enqueue`")):
            if (impl, qos) not in rows or ("baseline-" + impl, qos) not in rows: continue
            bp, ap = median("baseline-" + impl, qos, "publish_rate"), median(impl, qos, "publish_rate")
            br, ar = median("baseline-" + impl, qos, "receive_rate"), median(impl, qos, "receive_rate")
            print("| %d | %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |" % (qos, name, bp, ap, ap / bp, br, ar, ar / br))
print()
print("Publish/s per run (QoS 0): " + "; ".join("%s %s" % (impl, " ".join(r["publish_rate"] for r in rows[(impl, 0)])) for impl in ("c", "swift", "swift-handler", "swift-handler-normal") if (impl, 0) in rows))
PY
