#!/usr/bin/env bash
# Ampel soak run (issue 14), on demand:
#
#   Benchmarks/soak/run.sh                    # 30 minutes, 1,000 fixes/s over 100,000 devices
#   Benchmarks/soak/run.sh --minutes 2        # the short mode (a couple of minutes more for set-up and check)
#   nice -n 5 Benchmarks/soak/run.sh --bin .build/x86_64-unknown-linux-gnu/release
#
# One release-built `ampel run` (data.source rki, refresh every minute) against its own
# mosquitto on a free loopback port, its own RKI stand-in (rki_server.py: the 96 Bavarian
# districts with the incidences the RKI published day by day, the next day every minute) and a
# load generator (soak_load.c: OwnTracks JSON at QoS 1, devices replaying the recorded GPS
# tracks moved to random places in Bavaria). A recorder (soak_record.c) writes down every
# message the daemon publishes; every --sample seconds the daemon's VmRSS, VmHWM, open file
# descriptors, threads and CPU time are sampled from /proc. At the end check.py computes
# independently which alerts should have come (positions through `ampel resolve`, the served
# incidences through the bounds of `ampel rules --json`) and compares; it prints a summary,
# writes result.json and decides the exit code: 0 every check passed, 1 a check failed,
# 2 the run itself could not be carried out.
#
# Options (all optional):
#   --minutes N     load duration (default 30)
#   --devices N     devices (default 100000)        --rate N     fixes per second (default 1000)
#   --refresh S     the daemon's data.refresh in seconds (default 60)
#   --interval S    seconds between two publications of the stand-in (default 60)
#   --start-day D   first publication day served (default 2021-02-08: ~17 of 96 districts
#                   change phase per day in the following month)
#   --seed N        seed of the devices' tracks, anchors and order (default 1)
#   --sample S      sampling interval in seconds (default 10)
#   --warmup S      seconds of load before RSS and descriptors are judged (default 300 from
#                   20 minutes on, a quarter of the run below)
#   --bin DIR       use the `ampel` in DIR instead of building (release, --static-swift-stdlib)
#   --out DIR       where the run's files go (default benchmarks-out/soak/<UTC time>)
# Thresholds of the check: see check.py --help (environment CHECK_ARGS is passed on).
#
# Needs: mosquitto, libmosquitto-dev, gcc, python3, curl, swift (unless --bin).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh

minutes=30 devices=100000 rate=1000 refresh=60 interval=60 start_day=2021-02-08 seed=1 sample=10
warmup="" bin="" out=""
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) minutes=$2 ;; --devices) devices=$2 ;; --rate) rate=$2 ;; --refresh) refresh=$2 ;;
    --interval) interval=$2 ;; --start-day) start_day=$2 ;; --seed) seed=$2 ;; --sample) sample=$2 ;;
    --warmup) warmup=$2 ;; --bin) bin=$2 ;; --out) out=$2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 64 ;;
  esac
  shift 2
done
seconds=$(python3 -c "print(round($minutes * 60))")
if [ -z "$warmup" ]; then
  warmup=$(python3 -c "m = $minutes; print(300 if m >= 20 else round(m * 60 / 4))")
fi
window=$(python3 -c "print(min(300, max(10, round(($seconds - $warmup) / 2))))")
data=${AMPEL_SOAK_DATA:-../shared/data}
[ -f "$data/rki/rki_fixed_7day_incidence_bavaria_2020-11-18_2021-11-22.csv" ] || {
  echo "no RKI data in $data (set AMPEL_SOAK_DATA to the folder with rki/ and tracks/)" >&2; exit 2; }

for tool in mosquitto mosquitto_sub gcc python3 curl; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 2; }
done

out=${out:-benchmarks-out/soak/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
ln -sfn "$out" "$root/benchmarks-out/soak/latest" 2>/dev/null || true
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

# --- Binaries ---------------------------------------------------------------------------------
if [ -z "$bin" ]; then
  log "building ampel (release) ..."
  build=(swift build -c release --static-swift-stdlib --product ampel)
  # Builds on a shared machine take turns (flock) and may not hang forever.
  if command -v flock >/dev/null; then
    build=(flock "${BUILD_LOCK:-/tmp/ampel-build.lock}" timeout -s KILL 1800 "${build[@]}")
  fi
  "${build[@]}" >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log" >&2; exit 2; }
  bin=$(swift build -c release --static-swift-stdlib --show-bin-path)
fi
ampel=$bin/ampel
[ -x "$ampel" ] || { echo "no ampel in $bin" >&2; exit 2; }
gcc -O2 -Wall -o "$out/soak_load" Benchmarks/soak/soak_load.c -lmosquitto -lpthread -lm
gcc -O2 -Wall -o "$out/soak_record" Benchmarks/soak/soak_record.c -lmosquitto -lpthread
"$ampel" rules --json >"$out/rules.json"

# --- Inputs: tracks and anchor points ---------------------------------------------------------
python3 - "$data/tracks" "$out/tracks.txt" <<'PY'
import json, re, sys
folder, path = sys.argv[1:]
gpx = open(folder + "/rallygpxmerger_A5_Augsburg-Muenchen_PLANNED.gpx", encoding="utf-8").read()
a5 = [(float(lat), float(lon)) for lat, lon in re.findall(r'<trkpt lat="([0-9.]+)" lon="([0-9.]+)"', gpx)]
car = []
for p in json.load(open(folder + "/barefoot_x0001-001.json", encoding="utf-8")):
    lon, lat = p["point"][len("POINT("):-1].split()
    car.append((float(lat), float(lon)))
with open(path, "w") as f:
    for track in (a5, car):
        f.write("".join("%.7f %.7f\n" % p for p in track) + "\n")
print("tracks: A5 Augsburg-München %d points, München car %d points" % (len(a5), len(car)), file=sys.stderr)
PY
# Anchors: seeded random points of Bavaria's bounding box that `ampel resolve` puts in Bavaria.
python3 -c "
import random
r = random.Random($seed)
for _ in range(20000):
    print('%.6f,%.6f' % (r.uniform(47.27, 50.57), r.uniform(8.97, 13.84)))" >"$out/anchor-candidates.csv"
"$ampel" resolve <"$out/anchor-candidates.csv" | paste -d, "$out/anchor-candidates.csv" - \
  | awk -F, '$3 ~ /^09/ {print $1, $2}' >"$out/anchors.txt"
log "anchors: $(wc -l <"$out/anchors.txt") points in Bavaria"

# --- Processes ------------------------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-soak.XXXXXX")
BROKER_PID="" daemon_pid="" record_pid="" server_pid="" load_pid="" sampler_pid=""
cleanup() {
  set +e
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
  stop_pid "$load_pid" "$record_pid" "$daemon_pid" "$server_pid" "$BROKER_PID"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The broker: loopback, no persistence; TCP_NODELAY and raised limits as in
# scripts/lib/broker.sh, the queue raised further: after each publication the daemon republishes
# every device's state (100,000 messages at once) and the recorder must not lose one of them.
port=$(free_port)
mkdir -p "$tmp/broker"
cat >"$tmp/broker/mosquitto.conf" <<CONF
$([ "$(id -u)" -eq 0 ] && echo "user root")
listener $port 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 2000000
max_inflight_messages 1000
set_tcp_nodelay true
log_dest file $out/mosquitto.log
log_type error
log_type warning
log_type notice
log_type information
CONF
: >"$out/mosquitto.log"
mosquitto -c "$tmp/broker/mosquitto.conf" >"$out/mosquitto.out" 2>&1 &
BROKER_PID=$!
wait_for_line "$out/mosquitto.log" 'mosquitto version .* running' 15 "$BROKER_PID" || {
  echo "mosquitto did not start" >&2; cat "$out/mosquitto.out" >&2; exit 2; }

"$out/soak_record" --port "$port" --out "$out/record.log" >"$out/record.out" 2>&1 &
record_pid=$!
wait_for_line "$out/record.out" '^record ready' 15 "$record_pid" || { cat "$out/record.out" >&2; exit 2; }

hport=$(free_port)
days=$(python3 -c "print(int($seconds / $interval) + 10)")
python3 Benchmarks/soak/rki_server.py --port "$hport" --data "$data/rki" --start-day "$start_day" \
  --interval "$interval" --days "$days" --log "$out/rki.log" --datasets "$out/datasets.json" >"$out/rki_server.out" 2>&1 &
server_pid=$!
wait_for_line "$out/rki_server.out" '^rki_server ready' 30 "$server_pid" || { cat "$out/rki_server.out" >&2; exit 2; }
url=http://127.0.0.1:$hport/query

# The daemon starts from the first publication (the cache `ampel fetch` writes), so its first
# refresh finds nothing new and the run begins from known data.
mkdir -p "$out/state"
"$ampel" fetch --url "$url" --state-dir "$out/state" >"$out/fetch.out" 2>&1 || { cat "$out/fetch.out" >&2; exit 2; }
cat >"$out/ampel.yaml" <<YAML
broker: mqtt://127.0.0.1:$port
state_dir: $out/state
log_level: info
mqtt:
  client_id: ampel-soak
data:
  source: rki
  url: $url
  refresh: ${refresh}s
  # The served days are of 2021: without this every signal would be stale.
  max_age: 3650d
# The soak measures fix-to-state latency and checks a state per fix: every fix publishes one.
outputs:
  device_state: every_fix
YAML
"$ampel" run --config "$out/ampel.yaml" >"$out/daemon.log" 2>&1 &
daemon_pid=$!
bridge=$(mosquitto_sub -h 127.0.0.1 -p "$port" -t ampel/bridge/state -C 1 -W 120 2>/dev/null || true)
if [[ $bridge != *online* ]] || ! kill -0 "$daemon_pid" 2>/dev/null; then
  echo "the daemon did not come online; its log:" >&2; tail -n 30 "$out/daemon.log" >&2; exit 2
fi
log "daemon $daemon_pid online (broker :$port, RKI stand-in :$hport, $out)"

# Sampling: every $sample s from /proc (VmRSS, VmHWM in KiB; fds; threads; utime+stime in ticks).
sampler() {
  echo "t_ms,rss_kb,hwm_kb,fds,threads,cpu_ticks,broker_rss_kb"
  while kill -0 "$daemon_pid" 2>/dev/null; do
    local t rss hwm threads fds cpu brss
    t=$(date +%s%3N)
    read -r rss hwm threads < <(awk '/^VmRSS:/ {r=$2} /^VmHWM:/ {h=$2} /^Threads:/ {n=$2} END {print r, h, n}' "/proc/$daemon_pid/status" 2>/dev/null) || break
    fds=$(find "/proc/$daemon_pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    cpu=$(awk '{print $14 + $15}' "/proc/$daemon_pid/stat" 2>/dev/null) || break
    brss=$(awk '/^VmRSS:/ {print $2}' "/proc/$BROKER_PID/status" 2>/dev/null || echo 0)
    echo "$t,$rss,$hwm,$fds,$threads,$cpu,$brss"
    sleep "$sample"
  done
}
sampler >"$out/samples.csv" &
sampler_pid=$!

cat >"$out/meta.json" <<JSON
{"minutes": $minutes, "devices": $devices, "rate": $rate, "refreshSeconds": $refresh, "intervalSeconds": $interval,
 "startDay": "$start_day", "seed": $seed, "sampleSeconds": $sample, "warmupSeconds": $warmup, "windowSeconds": $window,
 "clockTicks": $(getconf CLK_TCK), "commit": "$(git rev-parse --short HEAD 2>/dev/null)",
 "sourcesCommit": "$(git log -1 --format=%h -- Sources Package.swift 2>/dev/null)$(git diff --quiet HEAD -- Sources Package.swift 2>/dev/null || echo '+uncommitted')",
 "machine": "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(uname -sr)",
 "mosquitto": "$(mosquitto -h | sed -n 's/mosquitto version //p' | head -1)", "nice": $(nice),
 "loadStartMs": $(date +%s%3N), "loadEndMs": 0}
JSON

# --- Load -------------------------------------------------------------------------------------
# Publications half a refresh after the daemon's refreshes (its first one, at start, is the last
# query so far), so each refresh finds the next day and never races a switch.
curl -fsS "http://127.0.0.1:$hport/soak/start?offset=$(python3 -c "print($refresh / 2)")" >/dev/null
"$out/soak_load" --port "$port" --seconds "$seconds" --rate "$rate" --devices "$devices" --seed "$seed" \
  --tracks "$out/tracks.txt" --anchors "$out/anchors.txt" --log "$out/fixes.log" >"$out/load.out" 2>&1 &
load_pid=$!
log "load: $rate fixes/s over $devices devices for $minutes min; publications every $interval s from $start_day"
wait "$load_pid" || { cat "$out/load.out" >&2; exit 2; }
load_pid=""
python3 - "$out/meta.json" <<'PY'
import json, sys, time
meta = json.load(open(sys.argv[1]))
meta["loadEndMs"] = int(time.time() * 1000)
json.dump(meta, open(sys.argv[1], "w"))
PY
log "$(tail -n 1 "$out/load.out")"

# --- Drain ------------------------------------------------------------------------------------
# No new publication from now on (the stand-in goes back to the last day it served), then the
# recorder ends once the daemon has been quiet for 10 s.
curl -fsS "http://127.0.0.1:$hport/soak/freeze" >"$out/freeze.out"
kill -USR1 "$record_pid"
timeout 600 tail --pid="$record_pid" -f /dev/null || true
wait "$record_pid" 2>/dev/null || true
record_pid=""
log "$(tail -n 1 "$out/record.out")"
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=""
alive=1; kill -0 "$daemon_pid" 2>/dev/null || alive=0
# A graceful stop, with its exit code (0 expected); SIGKILL after 30 s.
kill -TERM "$daemon_pid" 2>/dev/null || true
( sleep 30; kill -KILL "$daemon_pid" 2>/dev/null ) &
watchdog=$!
daemon_rc=0
wait "$daemon_pid" 2>/dev/null || daemon_rc=$?
kill "$watchdog" 2>/dev/null || true
daemon_pid=""
stop_pid "$server_pid" "$BROKER_PID"; server_pid=""; BROKER_PID=""
log "daemon alive until the end: $alive; exit code after SIGTERM: $daemon_rc"
python3 - "$out/meta.json" "$alive" "$daemon_rc" <<'PY'
import json, sys
meta = json.load(open(sys.argv[1]))
meta["daemonAliveAtEnd"] = sys.argv[2] == "1"
meta["daemonExitCode"] = int(sys.argv[3])
json.dump(meta, open(sys.argv[1], "w"))
PY

# --- Check ------------------------------------------------------------------------------------
set +e
# shellcheck disable=SC2086
python3 Benchmarks/soak/check.py --dir "$out" --ampel "$ampel" ${CHECK_ARGS:-}
rc=$?
set -e
du -sh "$out" | awk '{print "run folder: " $2 ", " $1}' >&2
exit $rc
