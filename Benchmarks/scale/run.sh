#!/usr/bin/env bash
# Ampel at scale (issue 14): `ampel run` with 1,000,000 devices, one command:
#
#   Benchmarks/scale/run.sh                   # DEVICES=1000000
#   DEVICES=100000 Benchmarks/scale/run.sh
#
# Release build (--static-swift-stdlib, as deployed; or the binaries in BIN_DIR). Each start
# gets a fresh mosquitto (so nothing retained from a run before can pass for this one's
# `online`), and measures, from the exec of `ampel run`:
#   online   - `ampel/bridge/state` says online (retained, as Home Assistant and lamps see it)
#   answered - a fix for one of the known devices, sent once online, comes back as its state
#   rss      - VmRSS once answered
# for four starts: (a) no state (the baseline of the same run), (b) a state.json with DEVICES
# devices written by gen_state.py in the daemon's format, (c) the restart after (b)'s SIGTERM
# (the stop's snapshot and journal), (d) the restart after a kill -9 in the middle of 2,000
# fixes (journal replay, then every retained topic again, paced). It also times each SIGTERM
# stop, and the fix-to-state latency at 1,000 fixes/s (AmpelBenchmarks daemon latency) with
# no devices and with DEVICES devices loaded: the journal makes persisting a change cost the
# same whatever the number of devices.
#
# The release build takes the machine's build lock (BUILD_LOCK, default /tmp/ampel-build.lock).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh

DEVICES=${DEVICES:-1000000}
DAY=${DAY:-2020-10-15}
LAT_SECONDS=${LAT_SECONDS:-10}
out=benchmarks-out/scale
mkdir -p "$out"
BUILD_LOCK=${BUILD_LOCK:-/tmp/ampel-build.lock} release_binaries "$out"
ampel=$bin/ampel
bench=$bin/AmpelBenchmarks

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-scale.XXXXXX")
daemon_pid=""; BROKER_PID=""; sub_pid=""
cleanup() {
  set +e
  [ -n "$sub_pid" ] && kill "$sub_pid" 2>/dev/null
  [ -n "$daemon_pid" ] && kill -9 "$daemon_pid" 2>/dev/null
  [ -n "$BROKER_PID" ] && kill -9 "$BROKER_PID" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

"$ampel" districts --source snapshot --date "$DAY" --json >"$tmp/districts.json"
state_file=$out/state-$DEVICES-$DAY.json
if [ ! -s "$state_file" ]; then
  echo "writing a state file with $DEVICES devices ..." >&2
  python3 Benchmarks/scale/gen_state.py --devices "$DEVICES" --districts "$tmp/districts.json" --out "$state_file"
fi
ls -l "$state_file" >&2

now() { date +%s.%N; }
ms_since() { python3 -c "import sys; print(round((float(sys.argv[2]) - float(sys.argv[1])) * 1000))" "$1" "$2"; }
rss_mb() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

results=$out/results.txt
: >"$results"

# start LABEL STATE_DIR: fresh broker, daemon started, online and one answered fix timed.
start() {
  local label=$1 dir=$2 port t0 t1 t2 key
  port=$(free_port)
  start_test_broker "$tmp/broker-$label" "$port"
  mosquitto_sub -p "$port" -t ampel/bridge/state -F '%p' >"$tmp/online-$label" &
  sub_pid=$!
  t0=$(now)
  "$ampel" run --broker "mqtt://127.0.0.1:$port" --source snapshot --date "$DAY" --state-dir "$dir" \
    --log-level info >"$tmp/daemon-$label.out" 2>&1 &
  daemon_pid=$!
  wait_for_line "$tmp/online-$label" '"online"' 120 "$daemon_pid" || { cat "$tmp/daemon-$label.out"; exit 1; }
  t1=$(now)
  key=scale-dev-0000007
  mosquitto_sub -p "$port" -t "ampel/device/$key/state" -F '%p' >"$tmp/answer-$label" &
  local answer_pid=$!
  mosquitto_pub -p "$port" -q 1 -t "ampel/location/$key" -m "{\"lat\":48.137,\"lon\":11.575,\"tst\":1900000000}"
  wait_for_line "$tmp/answer-$label" '1900000000' 120 "$daemon_pid" || { cat "$tmp/daemon-$label.out"; exit 1; }
  t2=$(now)
  kill "$answer_pid" 2>/dev/null || true
  kill "$sub_pid" 2>/dev/null || true; sub_pid=""
  CURRENT_PORT=$port
  printf 'start=%s online_ms=%s answered_ms=%s rss_mb=%s\n' \
    "$label" "$(ms_since "$t0" "$t1")" "$(ms_since "$t0" "$t2")" "$(rss_mb "$daemon_pid")" | tee -a "$results"
}

# stop_daemon LABEL SIGNAL: stops the daemon (TERM: timed, exit code checked) and the broker.
stop_daemon() {
  local label=$1 signal=$2 t0 t1 rc=0
  t0=$(now)
  kill "-$signal" "$daemon_pid"
  wait "$daemon_pid" || rc=$?
  t1=$(now)
  daemon_pid=""
  [ "$signal" = TERM ] && printf 'stop=%s signal=TERM ms=%s exit=%s\n' "$label" "$(ms_since "$t0" "$t1")" "$rc" | tee -a "$results"
  stop_pid "$BROKER_PID"; BROKER_PID=""
}

# (a) no state: what a start costs without devices.
mkdir -p "$tmp/empty"
start empty "$tmp/empty"
"$bench" daemon latency --port "$CURRENT_PORT" --qos 1 --rate 1000 --seconds "$LAT_SECONDS" --target daemon 2>>"$out/bench.log" \
  | sed 's/^/devices=0 /' | tee -a "$results"
stop_daemon empty TERM

# (b) DEVICES devices in state.json, (c) the restart after a clean stop.
mkdir -p "$tmp/big"
cp "$state_file" "$tmp/big/state.json"
start big "$tmp/big"
# The start announces and re-evaluates every device in paced batches; a fix meanwhile waits
# for at most one batch. The steady state is measured after it.
t0=$(now)
wait_for_line "$tmp/daemon-big.out" 'every device re-evaluated' 600 "$daemon_pid"
printf 'walk=big ms_after_answered=%s\n' "$(ms_since "$t0" "$(now)")" | tee -a "$results"
"$bench" daemon latency --port "$CURRENT_PORT" --qos 1 --rate 1000 --seconds "$LAT_SECONDS" --target daemon 2>>"$out/bench.log" \
  | sed "s/^/devices=$DEVICES /" | tee -a "$results"
stop_daemon big TERM
ls -l "$tmp/big" >>"$out/statedir.txt"
start big-restart "$tmp/big"

# (d) kill -9 in the middle of a stream of fixes, then the restart.
"$bench" daemon throughput --port "$CURRENT_PORT" --qos 1 --devices 2000 --count 2000 --window 500 --target daemon \
  2>>"$out/bench.log" >/dev/null &
load_pid=$!
# The kill's moment is the point of this step: some of the fixes handled, some not.
sleep 0.2
kill -9 "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
daemon_pid=""
kill "$load_pid" 2>/dev/null || true
stop_pid "$BROKER_PID"; BROKER_PID=""
start big-after-kill "$tmp/big"
grep -h 'journal replayed\|did not stop cleanly' "$tmp/daemon-big-after-kill.out" | head -3 >>"$results" || true
stop_daemon big-after-kill TERM

{
  echo "machine: $(nproc) vCPUs, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'), devices $DEVICES, data $DAY"
} | tee -a "$results"
