#!/usr/bin/env bash
# Ingest of the RKI's district file (the live source `rki`), one command:
#
#   Benchmarks/rki/run.sh                 # DEVICES=100000 RUNS=5 POLLS=20
#
# Release build (--static-swift-stdlib, as deployed; or the binaries in BIN_DIR). Generates a
# full-size file in the dataset's schema (every district, 2020-01-03..2026-08-22: 974,448 rows,
# the tests' generator) and the same file one day shorter, then measures:
#   parse    - the reader alone, in one process, against a memchr line scan of the same bytes
#              (AmpelBenchmarks rki parse): MB/s and the ratio to the floor.
#   process  - `ampel fetch --url http://127.0.0.1:<port>/...` (download from a local server,
#              parse, validate, history and cache written) against the program a user would
#              write instead, pandas.read_csv of the same URL keeping each district's newest
#              day (Benchmarks/rki/pandas_newest.py), RUNS each, alternating: median wall
#              time, the ratio, and each one's peak RSS.
#   daemon   - `ampel run --source rki --refresh 1` with DEVICES devices in its state (made by
#              Benchmarks/scale/gen_state.py): its RSS settled on the shorter file; its CPU per
#              check while the file is unchanged (POLLS checks answered 304, counted by the
#              server: an upper bound, the daemon's idle time in the window included); then the
#              peak RSS while it reads the next day's full file (VmHWM reset before the swap).
# Results go to benchmarks-out/rki/results.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh

DEVICES=${DEVICES:-100000}
RUNS=${RUNS:-5}
POLLS=${POLLS:-20}
# Which parts run (all by default): PARTS="daemon" Benchmarks/rki/run.sh
PARTS=" ${PARTS:-parse process daemon} "
out=benchmarks-out/rki
mkdir -p "$out"
BUILD_LOCK=${BUILD_LOCK:-/tmp/ampel-build.lock} release_binaries "$out"
ampel=$bin/ampel
bench=$bin/AmpelBenchmarks

venv=.venv-bench
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import pandas' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet pandas
fi

full=$out/landkreise-2026-08-22.csv
short=$out/landkreise-2026-08-21.csv
[ -s "$full" ] || "$bench" rki generate --out "$full"
[ -s "$short" ] || "$bench" rki generate --out "$short" --to 2026-08-21

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-rki.XXXXXX")
server_pid=""; daemon_pid=""; BROKER_PID=""
cleanup() {
  set +e
  [ -n "$daemon_pid" ] && kill -9 "$daemon_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  [ -n "$BROKER_PID" ] && kill -9 "$BROKER_PID" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

results=$out/results.txt
{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
  echo "file: $(wc -l <"$full") lines, $(stat -c %s "$full") bytes"
} >"$results"

if [[ $PARTS == *" parse "* ]]; then
echo "== parse" >&2
"$bench" rki parse "$full" --rounds 9 | tee -a "$results"
fi

# serve FILE: starts serve.py on FILE, sets server_pid, port and server_log.
serve() {
  server_log=$tmp/server-$RANDOM.log
  python3 Benchmarks/rki/serve.py "$1" >"$server_log" &
  server_pid=$!
  wait_for_line "$server_log" '^[0-9]+$' 10 "$server_pid"
  port=$(head -n 1 "$server_log")
}

if [[ $PARTS == *" process "* ]]; then
echo "== process" >&2
cp "$full" "$tmp/whole.csv"
serve "$tmp/whole.csv"
url=http://127.0.0.1:$port/whole.csv
: >"$tmp/ampel.times"; : >"$tmp/pandas.times"
for run in $(seq "$RUNS"); do
  one_ampel() { /usr/bin/time -f '%e %M' -a -o "$tmp/ampel.times" "$ampel" fetch --url "$url" --state-dir "$tmp/fetch-$run" --json >"$tmp/fetch-$run.json"; }
  one_pandas() { /usr/bin/time -f '%e %M' -a -o "$tmp/pandas.times" "$venv/bin/python" Benchmarks/rki/pandas_newest.py "$url" >"$tmp/pandas-$run.txt"; }
  if [ $((run % 2)) -eq 1 ]; then one_ampel; one_pandas; else one_pandas; one_ampel; fi
done
grep -q '"status":"updated"' "$tmp/fetch-1.json" || { cat "$tmp/fetch-1.json"; exit 1; }
grep -q '2026-08-22 400' "$tmp/pandas-1.txt" || { cat "$tmp/pandas-1.txt"; exit 1; }
kill "$server_pid"; server_pid=""
python3 - "$tmp/ampel.times" "$tmp/pandas.times" "$(stat -c %s "$full")" <<'PY' | tee -a "$results"
import statistics, sys
def load(path):
    rows = [line.split() for line in open(path) if line.strip()]
    return [float(r[0]) for r in rows], [int(r[1]) / 1024 for r in rows]
ampel_t, ampel_m = load(sys.argv[1])
pandas_t, pandas_m = load(sys.argv[2])
size = int(sys.argv[3]) / 1e6
a, p = statistics.median(ampel_t), statistics.median(pandas_t)
print(f"| whole process (download from 127.0.0.1, {len(ampel_t)} runs each) | median s | MB/s | peak RSS MB | runs s |")
print("|---|---|---|---|---|")
print(f"| ampel fetch | {a:.3f} | {size / a:.0f} | {statistics.median(ampel_m):.1f} | {' '.join(f'{t:.2f}' for t in ampel_t)} |")
print(f"| pandas.read_csv, newest day per district | {p:.3f} | {size / p:.0f} | {statistics.median(pandas_m):.1f} | {' '.join(f'{t:.2f}' for t in pandas_t)} |")
print(f"pandas / ampel: {p / a:.1f}x")
PY
fi

[[ $PARTS == *" daemon "* ]] || exit 0
echo "== daemon with $DEVICES devices" >&2
"$ampel" districts --source snapshot --date 2020-10-15 --json >"$tmp/districts.json"
state_file=benchmarks-out/scale/state-$DEVICES-2020-10-15.json
if [ ! -s "$state_file" ]; then
  mkdir -p benchmarks-out/scale
  python3 Benchmarks/scale/gen_state.py --devices "$DEVICES" --districts "$tmp/districts.json" --out "$state_file"
fi
mkdir -p "$tmp/daemon"
cp "$state_file" "$tmp/daemon/state.json"
cp "$short" "$tmp/live.csv"
serve "$tmp/live.csv"
bport=$(free_port)
start_test_broker "$tmp/broker" "$bport"
# The binary as a deployed one is: read from disk, not the linker's fresh pages. How the file
# came into the page cache decides how much of it one page fault maps (its folios): a binary
# just linked peaked 2-4 MB higher here (70.4-72.1 MB against 67.8-68.5 MB for the same file).
evict_from_page_cache "$ampel"
"$ampel" run --broker "mqtt://127.0.0.1:$bport" --source rki --url "http://127.0.0.1:$port/live.csv" --refresh 1 \
  --state-dir "$tmp/daemon" --http false --log-level info >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
wait_for_line "$tmp/daemon.log" 'date=2026-08-21 .*new data' 300 "$daemon_pid" || { tail -20 "$tmp/daemon.log"; exit 1; }
# count_lines FILE REGEX: how many lines match now.
count_lines() { grep -c "$2" "$1" || true; }
# until_count FILE REGEX N: waits (following the file) until N lines match.
until_count() { python3 - "$@" <<'PY'
import re, sys, time
path, regex, wanted = sys.argv[1], re.compile(sys.argv[2]), int(sys.argv[3])
with open(path) as f:
    seen = 0
    while seen < wanted:
        line = f.readline()
        if not line:
            time.sleep(0.05)
            continue
        if regex.search(line):
            seen += 1
PY
}
# until_after FILE FIRST THEN: waits (following the file) for a line matching THEN that comes
# after the first line matching FIRST.
until_after() { python3 - "$@" <<'PY'
import re, sys, time
path, first, then = sys.argv[1], re.compile(sys.argv[2]), re.compile(sys.argv[3])
seen_first = False
with open(path) as f:
    while True:
        line = f.readline()
        if not line:
            time.sleep(0.05)
            continue
        if not seen_first:
            seen_first = bool(first.search(line))
        elif then.search(line):
            break
PY
}
status() { awk -v k="$2" '$1 == k":" { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# Settled: the walk over every device that the file's day started is done, then a few unchanged checks.
until_after "$tmp/daemon.log" 'date=2026-08-21 .*new data' 'every device re-evaluated'
until_count "$server_log" '^304' $(( $(count_lines "$server_log" '^304') + 3 ))
settled=$(status "$daemon_pid" VmRSS)
start_peak=$(status "$daemon_pid" VmHWM)
before=$(count_lines "$server_log" '^304')
t0=$(cpu_ticks "$daemon_pid"); w0=$(date +%s.%N)
until_count "$server_log" '^304' $((before + POLLS))
t1=$(cpu_ticks "$daemon_pid"); w1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
# The next day: the full file replaces the shorter one (a new ETag); the peak is what reading it adds.
echo 5 >"/proc/$daemon_pid/clear_refs"
reset_peak=$(status "$daemon_pid" VmHWM)
cp "$full" "$tmp/live.csv.new" && mv "$tmp/live.csv.new" "$tmp/live.csv"
until_after "$tmp/daemon.log" 'date=2026-08-22 .*new data' 'every device re-evaluated'
after=$(count_lines "$server_log" '^304')
until_count "$server_log" '^304' $((after + 3))
ingest_peak=$(status "$daemon_pid" VmHWM)
after_rss=$(status "$daemon_pid" VmRSS)
# A corrected file for the same day that changes one district outside Bavaria: the whole file is
# read and applied again, but no Bavarian device's state changes, so this peak is the reading alone.
echo 5 >"/proc/$daemon_pid/clear_refs"
correction_base=$(status "$daemon_pid" VmHWM)
sed 's/^2026-08-22,06411,\([^,]*\),\([^,]*\),\([^,]*\),\([^,]*\),.*/2026-08-22,06411,\1,\2,\3,\4,0.4/' "$full" >"$tmp/live.csv.new"
cmp -s "$full" "$tmp/live.csv.new" && { echo "the correction changed nothing" >&2; exit 1; }
mv "$tmp/live.csv.new" "$tmp/live.csv"
until_count "$tmp/daemon.log" 'a corrected file for the day in force' 1
after=$(count_lines "$server_log" '^304')
until_count "$server_log" '^304' $((after + 3))
correction_peak=$(status "$daemon_pid" VmHWM)
python3 - "$t0" "$t1" "$w0" "$w1" "$hz" "$POLLS" <<PY | tee -a "$results"
import sys
t0, t1, w0, w1, hz, polls = (float(x) for x in sys.argv[1:])
print("| daemon, $DEVICES devices | value |")
print("|---|---|")
print(f"| RSS settled on the 2026-08-21 file | $settled MB |")
print(f"| peak RSS since start (state load and first ingest) | $start_peak MB |")
print(f"| peak RSS reset before the swap | $reset_peak MB |")
print(f"| peak RSS while reading the 2026-08-22 file | $ingest_peak MB |")
print(f"| RSS after | $after_rss MB |")
print(f"| peak RSS while reading a corrected 2026-08-22 file that changes no device (reset: $correction_base MB) | $correction_peak MB |")
print(f"| CPU per unchanged check (304), upper bound | {(t1 - t0) / hz / polls * 1000:.2f} ms ({int(polls)} checks in {w1 - w0:.1f} s, {(t1 - t0):.0f} ticks of 1/{int(hz)} s) |")
PY
echo "results: $results" >&2
