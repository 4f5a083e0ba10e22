#!/usr/bin/env bash
# Rebuild after a lost state (issue 14): how long `ampel run` takes to read DEVICES retained
# device states back from a real mosquitto, one command:
#
#   Benchmarks/rebuild/run.sh                    # release build, 100,000 devices
#   BIN_DIR=.build/debug DEVICES=20000 Benchmarks/rebuild/run.sh
#
#  1. a daemon on a fresh state directory gets one fix for each of DEVICES devices all over
#     Bavaria (AmpelBenchmarks daemon rss) and publishes their retained states; it is stopped;
#  2. its state.json is replaced by garbage and its journal deleted, so nothing on disk
#     remembers a device;
#  3. a new daemon starts on that directory; its log line "rebuilt the device phases ..." (or
#     the error saying why not) gives the time of the read and the counts, /proc its peak RSS.
# The broker runs with the queue and in-flight limits of deploy/mosquitto/mosquitto.conf
# (BROKER_LIMITS overrides the queue limits, e.g. "max_queued_messages 1000" for mosquitto's
# defaults); raw output in benchmarks-out/rebuild/.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh

DEVICES=${DEVICES:-100000}
RUNS=${RUNS:-3}
BROKER_LIMITS=${BROKER_LIMITS:-"max_queued_bytes 134217728
max_queued_messages 150000"}

out=benchmarks-out/rebuild
mkdir -p "$out"
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh
release_binaries "$out"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-rebuild-bench.XXXXXX")
daemon_pid=""
cleanup() {
  set +e
  stop_pid "$daemon_pid" "${BROKER_PID:-}"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(free_port)
# start_test_broker's limits come first in the file; the later lines win.
start_test_broker "$tmp/broker" "$port" "$BROKER_LIMITS"
broker=mqtt://127.0.0.1:$port
state=$tmp/state

start_daemon() { # LOG
  mosquitto_pub -h 127.0.0.1 -p "$port" -q 1 -r -n -t ampel/bridge/state
  "$bin/ampel" run --broker "$broker" --source snapshot --date 2020-10-15 --state-dir "$state" --log-level info >"$1" 2>&1 &
  daemon_pid=$!
  local bridge
  bridge=$(mosquitto_sub -h 127.0.0.1 -p "$port" -t ampel/bridge/state -C 1 -W 300 2>/dev/null || true)
  [[ $bridge == *online* ]] || { echo "the daemon did not come online:" >&2; tail -n 30 "$1" >&2; exit 1; }
}

start_daemon "$out/fill.log"
"$bin/AmpelBenchmarks" daemon rss --port "$port" --target daemon --pid "$daemon_pid" --devices "$DEVICES" --window 500 --settle 0 \
  | tee "$out/fill.txt"
stop_pid "$daemon_pid"; daemon_pid=""
size=$(mosquitto_sub -h 127.0.0.1 -p "$port" -t 'ampel/device/#' -C 1 -W 10 | wc -c)
echo "devices: $DEVICES; one device state: $size bytes; broker limits: $(echo $BROKER_LIMITS)" | tee "$out/results.txt"

for run in $(seq 1 "$RUNS"); do
  printf '\0garbage' >"$state/state.json"
  rm -f "$state"/journal-*.log "$state"/state.json.corrupt-*
  start_daemon "$out/rebuild-$run.log"
  # Online comes first; the read follows before the daemon's start.
  wait_for_line "$out/rebuild-$run.log" 'rebuilt the device phases|retained device states|fewer device states' 300 "$daemon_pid" || true
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon_pid/status")
  line=$(grep -E "rebuilt the device phases|retained device states|fewer device states" "$out/rebuild-$run.log" | head -1)
  echo "run $run: VmHWM ${hwm} kB; $line" | tee -a "$out/results.txt"
  stop_pid "$daemon_pid"; daemon_pid=""
done
