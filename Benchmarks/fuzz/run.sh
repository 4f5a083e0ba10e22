#!/usr/bin/env bash
# Broker-level fuzz run of `ampel run` (issue 14), one command:
#
#   Benchmarks/fuzz/run.sh                      # 1,000,000 payloads, a new seed (printed)
#   Benchmarks/fuzz/run.sh --count 200000 --seed 7
#   Benchmarks/fuzz/run.sh --ci                 # 20,000 payloads, seed 1: what CI runs
#
# Starts its own mosquitto on a free loopback port and the built `ampel run` (release,
# --static-swift-stdlib as deployed; or the binaries in --bin DIR) with every input on
# (OwnTracks, plain, Traccar, lamp and Home Assistant status topics), then fuzz_gen.c publishes
# adversarial payloads at QoS 0 and 1 and records every topic the daemon publishes, while this
# script samples the daemon's VmRSS each second. At the end check.py fails the run (exit 1)
# unless: the daemon is alive; its peak RSS (VmHWM) is under --rss-limit-mb; the bridge/info
# counters account for every payload sent (each determinate one under the reason
# docs/topics.md gives it); every topic it published is a documented one; and a good OwnTracks
# fix in München for a fresh device gets district 09162 and the phase `ampel check` gives.
# Then SIGTERM must end the daemon with exit code 0.
#
# Options:
#   --count N          payloads (default 1000000)
#   --seed S           random seed (default: the current time; printed, so a run can be repeated)
#   --window W         at most W payloads ahead of what the daemon has handled (default 20000);
#                      0 sends as fast as the broker takes them (a burst: the intake queue grows)
#   --rss-limit-ratio R  fail when the daemon's peak RSS (VmHWM) exceeds R x its RSS when it came
#                      online (default 2, the bound issue 14 sets for a burst; see README.md)
#   --rss-limit-mb M   an absolute limit in MiB instead
#   --bin DIR          use DIR/ampel instead of building (e.g. the debug build in CI)
#   --out DIR          results (default benchmarks-out/fuzz)
#   --only FAMILY, --only-kind KIND   one payload family / input only (to debug an expectation)
#   --ci               20,000 payloads, seed 1, window 5,000, unless given otherwise
#
# The release build takes the machine's build lock (/tmp/ampel-build.lock, BUILD_LOCK): do not
# run this script under that lock yourself.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh

count=1000000
seed=""
window=20000
rss_limit_mb=0
rss_limit_ratio=2
bin_dir=""
out=benchmarks-out/fuzz
gen_extra=()
ci=0
count_given=0
window_given=0
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; count_given=1; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --window) window=$2; window_given=1; shift 2 ;;
    --rss-limit-mb) rss_limit_mb=$2; shift 2 ;;
    --rss-limit-ratio) rss_limit_ratio=$2; shift 2 ;;
    --bin) bin_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only|--only-kind) gen_extra+=("$1" "$2"); shift 2 ;;
    --ci) ci=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 64 ;;
  esac
done
if [ $ci = 1 ]; then
  [ $count_given = 1 ] || count=20000
  [ $window_given = 1 ] || window=5000
  seed=${seed:-1}
fi
seed=${seed:-$(date +%s)}

mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -z "$bin_dir" ]; then
  echo "building ampel (release) ..." >&2
  flock "${BUILD_LOCK:-/tmp/ampel-build.lock}" timeout -s KILL 2400 \
    swift build -c release --static-swift-stdlib --product ampel >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
  bin_dir=$(swift build -c release --static-swift-stdlib --show-bin-path)
fi
ampel=$bin_dir/ampel
[ -x "$ampel" ] || { echo "no ampel in $bin_dir" >&2; exit 1; }
cc=${CC:-$(command -v cc || command -v gcc || command -v clang)}
"$cc" -O2 -Wall -o "$out/fuzz_gen" Benchmarks/fuzz/fuzz_gen.c -lmosquitto -lpthread -lm

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-fuzz.XXXXXX")
daemon_pid=""; sampler_pid=""; BROKER_PID=""
cleanup() {
  set +e
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
  stop_pid "$daemon_pid" "$BROKER_PID"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The broker: no persistence, no queue limit that would drop QoS 0 for a busy client (the
# pacing window keeps the queues short), $SYS every second for the dropped-message counter.
port=$(free_port)
mkdir -p "$tmp/broker"
{
  [ "$(id -u)" -eq 0 ] && echo "user root"
  echo "listener $port 127.0.0.1"
  echo "allow_anonymous true"
  echo "persistence false"
  echo "max_queued_messages 1000000"
  echo "max_inflight_messages 0"
  echo "set_tcp_nodelay true"
  echo "sys_interval 1"
  echo "log_dest file $tmp/broker/mosquitto.log"
  echo "log_type error"
  echo "log_type warning"
  echo "log_type notice"
  echo "log_type information"
} >"$tmp/broker/mosquitto.conf"
: >"$tmp/broker/mosquitto.log"
mosquitto -c "$tmp/broker/mosquitto.conf" >"$tmp/broker/mosquitto.out" 2>&1 &
BROKER_PID=$!
wait_for_line "$tmp/broker/mosquitto.log" 'mosquitto version .* running' 15 "$BROKER_PID" \
  || { echo "mosquitto did not start" >&2; cat "$tmp/broker/mosquitto.out" "$tmp/broker/mosquitto.log" >&2; exit 1; }

# Every input on: OwnTracks, plain, Traccar; three lamps (two subscribe to status topics);
# Home Assistant discovery (subscribes to homeassistant/status).
cat >"$tmp/ampel.yaml" <<YAML
broker: mqtt://127.0.0.1:$port
state_dir: $tmp/state
log_level: warning
mqtt:
  client_id: ampel-fuzz
data:
  source: snapshot
  date: 2020-10-15
inputs:
  owntracks: owntracks/+/+
  plain: ampel/location/+
  traccar: traccar/events
  max_payload: 16384
homeassistant:
  discovery: true
# The generator paces itself on the state of a probe device that sends the same fix again:
# every accepted fix must publish its state (on_change would stay silent); the check compares
# the München state with ampel check, texts included.
outputs:
  device_state: every_fix
  texts_in_state: true
lamps:
  - name: window
    driver: wled
    topic: wled/fuzz
    district: "09162"
  - name: hall
    driver: tasmota
    topic: fuzzbulb
    device: u0/d0
  - name: door
    driver: plain
    topic: signs/fuzz/color
    district: "09184"
    availability_topic: signs/fuzz/status
YAML
"$ampel" run --config "$tmp/ampel.yaml" >"$out/daemon.log" 2>&1 &
daemon_pid=$!
bridge=$(mosquitto_sub -h 127.0.0.1 -p "$port" -t ampel/bridge/state -C 1 -W 120 2>/dev/null || true)
if [[ $bridge != *online* ]] || ! kill -0 "$daemon_pid" 2>/dev/null; then
  echo "the daemon did not come online; its log:" >&2
  tail -n 30 "$out/daemon.log" >&2
  exit 1
fi

# VmRSS (and its anonymous and file-backed parts) once a second while it runs.
: >"$out/rss.txt"
(
  while [ -r "/proc/$daemon_pid/status" ]; do
    rss=$(awk '/^VmRSS:/ { r = $2 } /^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 } END { if (r != "") print r, a, f }' \
      "/proc/$daemon_pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && echo "$(date +%s.%N) $rss" >>"$out/rss.txt"
    sleep 1
  done
) &
sampler_pid=$!

echo "fuzzing: $count payloads, seed $seed, window $window, broker port $port, daemon pid $daemon_pid" >&2
started=$(date +%s.%N)
gen_rc=0
"$out/fuzz_gen" --port "$port" --count "$count" --seed "$seed" --window "$window" --traccar-topic traccar/events \
  --daemon-pid "$daemon_pid" \
  --out "$out" "${gen_extra[@]}" 2>"$out/gen.log" || gen_rc=$?
finished=$(date +%s.%N)
cat "$out/gen.log" >&2

alive=0
kill -0 "$daemon_pid" 2>/dev/null && alive=1
cp "/proc/$daemon_pid/status" "$out/daemon-status.txt" 2>/dev/null || : >"$out/daemon-status.txt"
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=""

"$ampel" check --lat 48.1374 --lon 11.5755 --json --source snapshot --date 2020-10-15 >"$out/check.json"

# A graceful stop must still work after all of it.
exit_code=-1
if [ $alive = 1 ]; then
  kill -TERM "$daemon_pid"
  if timeout 30 tail --pid="$daemon_pid" -s 0.05 -f /dev/null; then
    exit_code=0
    wait "$daemon_pid" || exit_code=$?
  else
    kill -KILL "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
else
  wait "$daemon_pid" 2>/dev/null || exit_code=$?
fi
daemon_pid=""
cp "$tmp/broker/mosquitto.log" "$out/mosquitto.log"

python3 Benchmarks/fuzz/check.py --out "$out" --rss-limit-mb "$rss_limit_mb" --rss-limit-ratio "$rss_limit_ratio" --generator-exit "$gen_rc" \
  --alive "$alive" --stop-exit "$exit_code" --seconds "$(awk "BEGIN { printf \"%.1f\", $finished - $started }")"
