#!/usr/bin/env bash
# A burst of QoS 0 fixes against `ampel run` (issue 29): PUBLISHERS processes at once, each as
# fast as it can, COUNT fixes each over DEVICES devices of its own, after a warm-up that
# (QoS 1: nothing shed) made every device known. Measures the daemon's RSS settled before the burst and its peak
# (VmHWM reset at the burst's start), and what it accepted and dropped, from bridge/info.
#
#   Benchmarks/burst/run.sh            # PUBLISHERS=5 COUNT=60000 DEVICES=2000 (300,000 fixes)
#   BIN_DIR=.build/release Benchmarks/burst/run.sh   # a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh

PUBLISHERS=${PUBLISHERS:-5}
# ALTERNATE=1: every fix changes its device's phase (an alert each), the outgoing worst case.
ALTERNATE=${ALTERNATE:-0}
COUNT=${COUNT:-60000}
DEVICES=${DEVICES:-2000}
out=benchmarks-out/burst
mkdir -p "$out"
BUILD_LOCK=${BUILD_LOCK:-/tmp/ampel-build.lock} release_binaries "$out" ampel
ampel=$bin/ampel
tmp=$(mktemp -d)
cc -O2 -Wall -o "$tmp/fleet" Benchmarks/daemon/fleet.c -lmosquitto -lpthread

daemon_pid=""; BROKER_PID=""
trap end_daemon_and_broker EXIT

port=$(free_port)
start_test_broker "$tmp/broker" "$port"
"$ampel" run --broker "mqtt://127.0.0.1:$port" --source snapshot --date 2020-10-15 --state-dir "$tmp/state" \
  --http false --log-level info >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
wait_for_line "$tmp/daemon.log" 'subscribed' 60 "$daemon_pid"

status() { awk -v k="$2" '$1 == k":" { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
# info FIELD: a number from the retained bridge/info (python reads the JSON).
info() {
  mosquitto_sub -p "$port" -t ampel/bridge/info -C 1 -W 10 | python3 -c '
import json, sys
info = json.load(sys.stdin)
c = info["counters"]
print(sum(c["accepted"].values()), sum(c["dropped"].values()), c.get("intakePaused", 0), json.dumps(c["dropped"]))'
}
# until_handled N [settle]: reads each bridge/info as the daemon publishes it (once a tick while
# its counts move) until accepted + dropped reach N; with `settle`, also once none has come for
# 6 s: the counts stopped moving (QoS 0 fixes the broker shed never arrive).
until_handled() {
  python3 - "$port" "$1" "${2:-}" <<'PY' || { echo "until_handled $1 ${2:-}: failed" >&2; return 1; }
import json, os, select, subprocess, sys
port, want, settle = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "settle"
sub = subprocess.Popen(["mosquitto_sub", "-p", port, "-t", "ampel/bridge/info"], stdout=subprocess.PIPE)
pending = b""
try:
    while True:
        # Unbuffered: a line read along with the one before must not wait for the next message.
        ready, _, _ = select.select([sub.stdout], [], [], 6 if settle else 600)
        if not ready:
            sys.exit(0 if settle else "no bridge/info for 600 s")
        chunk = os.read(sub.stdout.fileno(), 1 << 20)
        if not chunk:
            sys.exit("mosquitto_sub ended")
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            c = json.loads(line)["counters"]
            if sum(c["accepted"].values()) + sum(c["dropped"].values()) >= want:
                sys.exit(0)
finally:
    sub.terminate()
    sub.wait()
PY
}

# The broker's own count of publishes it dropped for a client whose queue was full.
# Retained once the broker's first $SYS pass (sys_interval after its start) has counted; none
# before it, when the count is still 0.
# mosquitto_sub exits 27 when -W runs out: only that means "none retained"; any other failure
# (no broker) fails the script instead of reading as 0 shed.
broker_dropped() {
  local rc=0
  mosquitto_sub -p "$port" -t '$SYS/broker/publish/messages/dropped' -C 1 -W 2 2>/dev/null || rc=$?
  if [ "$rc" = 27 ]; then echo 0; elif [ "$rc" != 0 ]; then echo "broker_dropped: mosquitto_sub exit $rc" >&2; return 1; fi
}

total_warm=$((PUBLISHERS * DEVICES))
"$tmp/fleet" burst --port "$port" --publishers "$PUBLISHERS" --count "$DEVICES" --devices "$DEVICES" --round 0 --alternate "$ALTERNATE" --qos 1 >/dev/null
until_handled "$total_warm"
# Settled: the daemon trims its heap at a tick once its intake has been quiet for 2 s; nothing
# outside it tells when, so this waits that long and a margin.
sleep 5
settled=$(status "$daemon_pid" VmRSS)
read -r accepted0 dropped0 rest < <(info)
shed0=$(broker_dropped)
echo 5 >"/proc/$daemon_pid/clear_refs"
start=$(date +%s.%N)
"$tmp/fleet" burst --port "$port" --publishers "$PUBLISHERS" --count "$COUNT" --devices "$DEVICES" --round 1000 --alternate "$ALTERNATE" | sed 's/^/  /' >&2
sent_at=$(date +%s.%N)
total=$((total_warm + PUBLISHERS * COUNT))
# QoS 0 may be lost on the way (the broker sheds for a slow client): until the counts stop moving.
until_handled "$total" settle
peak=$(status "$daemon_pid" VmHWM)
after=$(status "$daemon_pid" VmRSS)
read -r accepted dropped paused detail < <(info)
# The broker counts in $SYS every sys_interval (10 s by default), a value only when it changed;
# its uptime changes every time. The first uptime is the retained one, the second the next pass,
# which has retained the dropped count up to now before this script connects again.
mosquitto_sub -p "$port" -t '$SYS/broker/uptime' -C 2 -W 30 >/dev/null
shed=$(( $(broker_dropped) - shed0 ))
burst=$((PUBLISHERS * COUNT))
python3 - "$settled" "$peak" "$after" "$((accepted - accepted0))" "$((dropped - dropped0))" "$paused" "$burst" "$start" "$sent_at" "$detail" "$shed" <<'PY' | tee "$out/results.txt"
import sys
settled, peak, after = (float(x) for x in sys.argv[1:4])
accepted, dropped, paused, total = (int(x) for x in sys.argv[4:8])
start, sent = float(sys.argv[8]), float(sys.argv[9])
shed = int(sys.argv[11])
bound = max(2 * settled, settled + 40)
missing = total - accepted - dropped
print(f"| burst of {total:,} QoS 0 fixes: accepted {accepted:,}, dropped by the daemon {dropped:,} {sys.argv[10]}, shed by the broker {shed:,} ($SYS/broker/publish/messages/dropped); uncounted {max(0, missing - shed):,} | |")
print(f"| RSS settled before the burst | {settled:.1f} MB |")
print(f"| peak RSS during the burst | {peak:.1f} MB (bound max(2x, +40 MB) = {bound:.1f} MB: {'met' if peak <= bound else 'NOT met'}) |")
print(f"| RSS after | {after:.1f} MB |")
print(f"| intake pauses (the daemon stopped reading) | {paused} |")
print(f"| publishers' send time | {sent - start:.2f} s |")
# The check CI runs at a smaller scale: the bound holds and every fix is counted somewhere.
sys.exit(0 if peak <= bound and missing <= shed else 1)
PY
