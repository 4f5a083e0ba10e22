#!/usr/bin/env bash
# Fleet benchmark (issue 16), one command:
#
#   Benchmarks/daemon/fleet.sh                     # defaults below; override with env vars
#   RUNS=5 COUNT=100000 Benchmarks/daemon/fleet.sh
#
# Through one mosquitto that this script starts (scripts/lib/broker.sh), alternating in each
# run: `ampel run` with outputs.device_state every_fix, the twin relay (C, libmosquitto:
# subscribes like the daemon, publishes one retained QoS 1 message of the daemon's every_fix
# state size per fix, on the same topic shape), the same twin sending the daemon's alerts too
# (`twin_alerts`, below), the plain C relay (the same, payload passed
# through), `ampel run` with on_change, and a C sink (takes the fixes in, publishes nothing:
# the broker's floor); at QoS 0 and 1. The fleet: DEVICES devices
# replaying the recorded tracks in TRACKS (resampled to one point per km, there and back)
# from spread offsets, one point (~1 km) per fix. Per target: fixes/s (send as fast as the
# target takes them, a marker fix every 500 fixes, at most 4 markers outstanding), CPU of
# the target and of the broker per fix (/proc/<pid>/stat), messages and bytes the target
# published per fix (at a subscriber to all its outputs). Prints a Markdown section with
# medians and ratios; raw lines in benchmarks-out/fleet/.
#
#   BIN_DIR=$(swift build -c release --static-swift-stdlib --show-bin-path) Benchmarks/daemon/fleet.sh
#
# In real time (the heartbeat shows): each device sends one fix per INTERVAL_MS, the daemon's
# outputs.heartbeat as in the field (HEARTBEAT, default the daemon's 60 s), COUNT fixes after
# one paced warm-up round. As fast as the target takes the fixes (INTERVAL_MS=0, the default),
# no device's state gets a heartbeat old within the run.
#
#   INTERVAL_MS=10000 DEVICES=2000 COUNT=36000 QOS=1 TARGETS="every_fix on_change sink" RUNS=1 \
#     Benchmarks/daemon/fleet.sh
#
# `twin_alerts` is the twin the goal (every_fix >= 0.95 of it) is measured against: it does the
# daemon's MQTT work, states and alerts. One in every ALERT_EVERY fixes (14: the daemon's 0.07
# alerts per fix on this fleet, messages/fix 1.07) gets an alert of the daemon's mean alert size,
# alert and state at ALERT_QOS (default 2, the daemon's mqtt.alert_qos on MQTT 5; the state is the
# alert's witness), the rest states at QoS 1. For another fleet (DEVICES, STEP, TRACKS) set
# ALERT_EVERY to 1 / (messages - 1) of every_fix's messages/fix; the table shows both targets'
# messages/fix side by side. `twin` publishes the states only, less MQTT work than the daemon's:
# the summary shows what the alerts alone cost a plain libmosquitto client (twin_alerts/twin).
#
# Before/after in one rotation: the `ampel` of an earlier revision as the target `baseline`
# (every_fix), beside this build's:
#
#   BASELINE_BIN=$(Benchmarks/build-baseline.sh REV) TARGETS="every_fix baseline twin_alerts" Benchmarks/daemon/fleet.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh

RUNS=${RUNS:-3}
DEVICES=${DEVICES:-5000}
COUNT=${COUNT:-50000}
TRACKS=${TRACKS:-../shared/data/tracks}
DATE=${DATE:-2020-10-15}
# The in-flight window of the daemon and of the relays alike: the broker's max_inflight_messages
# (an MQTT 5 client takes the broker's receive maximum as its window; libmosquitto offers no
# smaller one) and the relays' own (MQTT 3.1.1 has no receive maximum).
INFLIGHT=${INFLIGHT:-1000}
INTERVAL_MS=${INTERVAL_MS:-0}
HEARTBEAT=${HEARTBEAT:-}
QOS=${QOS:-0 1}
TARGETS=${TARGETS:-every_fix twin twin_alerts plain on_change sink}
ALERT_EVERY=${ALERT_EVERY:-14}
case " $TARGETS " in
  *" baseline "*) [ -x "${BASELINE_BIN:-}/ampel" ] || { echo "TARGETS has baseline: set BASELINE_BIN to a directory with an ampel" >&2; exit 1; } ;;
esac
STEP=${STEP:-1000}
export BROKER_MAX_INFLIGHT=$INFLIGHT

out=benchmarks-out/fleet
mkdir -p "$out"
release_binaries "$out" ampel
ampel=$bin/ampel
fleet=$out/fleet
cc -O2 -Wall -o "$fleet" Benchmarks/daemon/fleet.c -lmosquitto -lpthread
python3 Benchmarks/daemon/route.py "$TRACKS" "$STEP" >"$out/route.txt"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-fleet-bench.XXXXXX")
daemon_pid=""; relay_pid=""
cleanup() {
  set +e
  stop_pid "$daemon_pid" "$relay_pid" "${BROKER_PID:-}"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(free_port)
start_test_broker "$tmp/broker" "$port"
broker=mqtt://127.0.0.1:$port

start_daemon() { # MODE [BINARY]
  local binary=${2:-$ampel}
  printf 'outputs:\n  device_state: %s\nhomeassistant:\n  discovery: false\n' "$1" >"$tmp/$1.yaml"
  if [ -n "$HEARTBEAT" ]; then sed -i "2a\\  heartbeat: $HEARTBEAT" "$tmp/$1.yaml"; fi
  # ALERT_QOS=1: alerts and their witness at QoS 1 instead of the default 2 (mqtt.alert_qos), to
  # see what the QoS 2 of issue 36 costs the fleet.
  if [ -n "${ALERT_QOS:-}" ]; then printf 'mqtt:\n  alert_qos: %s\n' "$ALERT_QOS" >>"$tmp/$1.yaml"; fi
  mosquitto_pub -h 127.0.0.1 -p "$port" -q 1 -r -n -t ampel/bridge/state
  rm -rf "$tmp/state-$1"
  "$binary" run --config "$tmp/$1.yaml" --broker "$broker" --source snapshot --date "$DATE" --state-dir "$tmp/state-$1" \
    --log-level warning >>"$out/daemon.log" 2>&1 &
  daemon_pid=$!
  local bridge
  bridge=$(mosquitto_sub -h 127.0.0.1 -p "$port" -t ampel/bridge/state -C 1 -W 120 2>/dev/null || true)
  [[ $bridge == *online* ]] || { echo "the daemon did not come online" >&2; tail -n 30 "$out/daemon.log" >&2; exit 1; }
}

start_relay() { # KIND QOS SIZE [relay options]
  "$fleet" relay --port "$port" --kind "$1" --qos "$2" --size "$3" --inflight "$INFLIGHT" "${@:4}" >"$tmp/relay.log" 2>&1 &
  relay_pid=$!
  wait_for_line "$tmp/relay.log" '^relay ready' 30 "$relay_pid" || { cat "$tmp/relay.log" >&2; exit 1; }
}

# The size of the daemon's every_fix state on this fleet: what the twin publishes.
# The size of its alerts (a first sighting alerts too): what twin_alerts publishes.
size=${STATE_SIZE:-}
alert_size=${ALERT_SIZE:-}
# Only twin_alerts needs the alert size: without it, no alert is waited for.
[[ " $TARGETS " == *" twin_alerts "* ]] || alert_size=${alert_size:-0}
if [ -z "$size" ] || [ -z "$alert_size" ]; then
  start_daemon every_fix
  mosquitto_sub -h 127.0.0.1 -p "$port" -t 'ampel/device/+/state' -C 200 -F '%l' >"$tmp/sizes" &
  pids=($!)
  if [ -z "$alert_size" ]; then
    mosquitto_sub -h 127.0.0.1 -p "$port" -t 'ampel/device/+/alert' -C 100 -W 60 -F '%l' >"$tmp/alert-sizes" &
    pids+=($!)
  fi
  "$fleet" load --port "$port" --target daemon --qos 1 --route "$out/route.txt" --devices 200 --count 0 --tag s >/dev/null
  wait "${pids[@]}" || true
  size=${size:-$(awk '{ s += $1; n++ } END { printf "%d", s / n }' "$tmp/sizes")}
  alert_size=${alert_size:-$(awk '{ s += $1; n++ } END { if (n == 0) { print "no alert seen" > "/dev/stderr"; exit 1 } printf "%d", s / n }' "$tmp/alert-sizes")}
  stop_pid "$daemon_pid"; daemon_pid=""
fi
echo "twin payload: $size bytes (mean every_fix state of the fleet); alerts $alert_size bytes" >&2

results="$out/results.txt"
: >"$results"
measure() { # TARGET QOS
  local target=$1 qos=$2 pid
  case $target in
    every_fix | on_change) start_daemon "$target"; pid=$daemon_pid ;;
    baseline) start_daemon every_fix "$BASELINE_BIN/ampel"; pid=$daemon_pid ;;
    twin) start_relay twin "$qos" "$size"; pid=$relay_pid ;;
    twin_alerts)
      start_relay twin_alerts "$qos" "$size" --alert-every "$ALERT_EVERY" --alert-size "$alert_size" --alert-qos "${ALERT_QOS:-2}"
      pid=$relay_pid ;;
    plain) start_relay plain "$qos" "$size"; pid=$relay_pid ;;
    sink) start_relay sink "$qos" "$size"; pid=$relay_pid ;;
  esac
  local kind=daemon
  case $target in twin | twin_alerts | plain | sink) kind=$target ;; esac
  "$fleet" load --port "$port" --target "$kind" --qos "$qos" --route "$out/route.txt" --devices "$DEVICES" --count "$COUNT" \
    --target-pid "$pid" --broker-pid "$BROKER_PID" --tag "r$RANDOM" --interval-ms "$INTERVAL_MS" 2>>"$out/load.log" \
    | sed "s/target=$kind/target=$target/" | tee -a "$results"
  stop_pid "$daemon_pid" "$relay_pid"; daemon_pid=""; relay_pid=""
}

targets=$TARGETS
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for run in $(seq 1 "$RUNS"); do
  order=$targets
  [ $((run % 2)) = 0 ] && order=$(echo "$targets" | tr ' ' '\n' | tac | tr '\n' ' ')
  for qos in $QOS; do
    for target in $order; do measure "$target" "$qos"; done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$results" "$RUNS" "$DEVICES" "$COUNT" "$size $alert_size $ALERT_EVERY" "$load_before" "$load_after" "$INTERVAL_MS" "${HEARTBEAT:-60s}" "$STEP" <<'PY'
import statistics, subprocess, sys, platform
path, runs, devices, count, size, load_before, load_after, interval_ms, heartbeat, step = sys.argv[1:]
rows = [dict(kv.split("=", 1) for kv in line.split()) for line in open(path) if line.startswith("mode=fleet")]
def med(target, qos, key):
    values = [float(r[key]) for r in rows if r["target"] == target and r["qos"] == str(qos)]
    return statistics.median(values) if values else float("nan")
def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
qoses = sorted({int(r["qos"]) for r in rows})
targets = [t for t in ("every_fix", "baseline", "twin", "twin_alerts", "plain", "on_change", "sink") if any(r["target"] == t for r in rows)]
state_size, alert_size, alert_every = size.split()
pace = ("as fast as the target takes them, tst 10 s apart" if interval_ms == "0"
        else "in real time, one fix per device every %g s, heartbeat %s" % (float(interval_ms) / 1000, heartbeat))
print()
print("Machine: %s, %s cores, %s; mosquitto %s; load average %s before, %s after (1/5/15 min)" % (
    sh("lscpu | sed -n 's/^Model name: *//p'"), sh("nproc"), platform.platform(),
    sh("mosquitto -h | sed -n 's/mosquitto version //p' | head -1"), load_before, load_after))
alerts = ("; twin_alerts: an alert of %s bytes every %s fixes" % (alert_size, alert_every)) if alert_size != "0" else ""
print("Command: `Benchmarks/daemon/fleet.sh` (RUNS=%s, medians; %s devices on the recorded tracks, one point per %s m "
      "per fix, %s; %s fixes per measurement; twin payload %s bytes%s)" % (
          runs, devices, step, pace, count, state_size, alerts))
print()
print("| QoS | target | fixes/s | target CPU µs/fix | broker CPU µs/fix | messages/fix | bytes/fix |")
print("|---|---|---|---|---|---|---|")
for qos in qoses:
    for t in targets:
        print("| %d | %s | %.0f | %.1f | %.1f | %.3f | %.0f |" % (qos, t, med(t, qos, "rate"), med(t, qos, "target_cpu_us"),
              med(t, qos, "broker_cpu_us"), med(t, qos, "messages"), med(t, qos, "bytes")))
print()
def ratio(qos, a, b, key):
    top, bottom = med(a, qos, key), med(b, qos, key)
    return top / bottom if bottom else float("inf")
for qos in qoses:
    parts = []
    if "twin_alerts" in targets:
        parts.append("every_fix/twin_alerts fixes/s %.2f (goal >= 0.95)" % ratio(qos, "every_fix", "twin_alerts", "rate"))
        if "baseline" in targets:
            parts.append("baseline/twin_alerts %.2f" % ratio(qos, "baseline", "twin_alerts", "rate"))
    if "twin" in targets:
        parts.append("every_fix/twin (states only) %.2f" % ratio(qos, "every_fix", "twin", "rate"))
        if "baseline" in targets:
            parts.append("baseline/twin %.2f" % ratio(qos, "baseline", "twin", "rate"))
        if "twin_alerts" in targets:
            parts.append("twin_alerts/twin %.2f (the alerts' cost to a plain client)" % ratio(qos, "twin_alerts", "twin", "rate"))
    if "baseline" in targets:
        parts.append("every_fix/baseline fixes/s %.2f, CPU per fix %.2f" % (
            ratio(qos, "every_fix", "baseline", "rate"), ratio(qos, "every_fix", "baseline", "target_cpu_us")))
    if "on_change" in targets:
        parts.append("on_change against every_fix: broker CPU per fix %.1fx lower, bytes per fix %.1fx lower (goals >= 5)" % (
            ratio(qos, "every_fix", "on_change", "broker_cpu_us"), ratio(qos, "every_fix", "on_change", "bytes")))
    if "plain" in targets and "on_change" in targets:
        parts.append("on_change/plain fixes/s %.2f (goal >= 1.5)" % ratio(qos, "on_change", "plain", "rate"))
    print("QoS %d: %s" % (qos, "; ".join(parts)))
    if "sink" in targets:
        floor = med("sink", qos, "broker_cpu_us")
        above = lambda t: med(t, qos, "broker_cpu_us") - floor
        line = ("QoS %d: the broker's floor (sink: fixes in, nothing out) %.1f µs/fix: no output mode can lower the broker's "
                "CPU per fix more than every_fix/floor = %.1fx" % (qos, floor, ratio(qos, "every_fix", "sink", "broker_cpu_us")))
        if "on_change" in targets:
            line += ("; on_change is at %.2f of the floor; above the floor (the broker's work for the target's output) "
                     "every_fix %.1f, on_change %.1f µs/fix" % (ratio(qos, "on_change", "sink", "broker_cpu_us"),
                                                               above("every_fix"), above("on_change")))
        print(line)
PY
