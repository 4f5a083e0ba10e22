#!/usr/bin/env bash
# HTTP benchmark of `ampel run` (issue 18), one command:
#
#   Benchmarks/http/run.sh                     # defaults below; override with env vars
#
#  1. /api/signal requests per second (wrk) against the server's cheapest route, /healthz (a
#     constant answer: the do-nothing route of the same Hummingbird server), in the same run,
#     alternating which goes first; goal: /api/signal >= 0.8x.
#  2. The daemon benchmark (Benchmarks/daemon/run.sh: daemon and do-nothing relay through one
#     mosquitto) without and with a scraper asking /metrics every second (SCRAPE=1), alternating;
#     goal: no measurable loss of the daemon's throughput relative to the relay.
#  3. The page with PAGE_DEVICES (100,000) devices loaded from a state file (gen_state.py): the
#     time to render `/` and the district page, and a device page and a search of /api/devices,
#     each with one connection (wrk -c1: the mean latency is the render time) beside the same
#     routes with no devices, in the same run.
# Release builds; prints a Markdown section and keeps the raw lines in benchmarks-out/http/.
# wrk comes from Debian (apt-get install wrk); the script installs it when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh

RUNS=${RUNS:-3}
SECONDS_PER=${SECONDS_PER:-10}  # wrk duration per measurement
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
DAEMON_RUNS=${DAEMON_RUNS:-2}   # daemon benchmark rounds per variant (each with RUNS=1)

if ! command -v wrk >/dev/null; then
  echo "installing wrk" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get install -y -qq wrk >/dev/null
fi

out=benchmarks-out/http
mkdir -p "$out"
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh
release_binaries "$out"
ampel=$bin/ampel

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-http-bench.XXXXXX")
daemon_pid=""
cleanup() {
  set +e
  stop_pid "$daemon_pid" "${BROKER_PID:-}"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(free_port)
http_port=$(free_port)
start_test_broker "$tmp/broker" "$port"
"$ampel" run --broker "mqtt://127.0.0.1:$port" --source snapshot --date 2020-10-15 --state-dir "$tmp/state" \
  --http "127.0.0.1:$http_port" >"$out/daemon.log" 2>&1 &
daemon_pid=$!
base=http://127.0.0.1:$http_port
ready=0
for _ in $(seq 1 600); do
  if curl -fs -o /dev/null "$base/readyz"; then ready=1; break; fi
  kill -0 "$daemon_pid" 2>/dev/null || break
  sleep 0.1
done
[ $ready = 1 ] || { echo "the daemon did not become ready; its log:" >&2; tail -n 30 "$out/daemon.log" >&2; exit 1; }

results="$out/results.txt"
: >"$results"
measure() { # NAME PATH
  local rps
  rps=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECONDS_PER}s" "$base$2" | tee -a "$out/wrk.log" | awk '/^Requests\/sec/ {print $2}')
  echo "mode=wrk route=$1 rps=$rps" | tee -a "$results"
}
# München: an index lookup and a signal in the configured language, as a device there gets it.
signal="/api/signal?lat=48.1374&lon=11.5755"
for run in $(seq 1 "$RUNS"); do
  if [ $((run % 2)) = 1 ]; then measure noop /healthz; measure signal "$signal"
  else measure signal "$signal"; measure noop /healthz; fi
done
stop_pid "$daemon_pid"; daemon_pid=""
stop_pid "${BROKER_PID:-}"; BROKER_PID=""

# The page with no devices and with PAGE_DEVICES devices: one connection, so wrk's mean latency
# is the time to render and send one answer.
PAGE_DEVICES=${PAGE_DEVICES:-100000}
"$ampel" districts --source snapshot --date 2020-10-15 --json >"$tmp/districts.json"
for devices in 0 "$PAGE_DEVICES"; do
  port=$(free_port); http_port=$(free_port)
  start_test_broker "$tmp/broker-$devices" "$port"
  mkdir -p "$tmp/page-$devices"
  if [ "$devices" != 0 ]; then
    python3 Benchmarks/scale/gen_state.py --devices "$devices" --districts "$tmp/districts.json" --out "$tmp/page-$devices/state.json"
  fi
  "$ampel" run --broker "mqtt://127.0.0.1:$port" --source snapshot --date 2020-10-15 --state-dir "$tmp/page-$devices" \
    --http "127.0.0.1:$http_port" >"$out/daemon-page-$devices.log" 2>&1 &
  daemon_pid=$!
  base=http://127.0.0.1:$http_port
  for _ in $(seq 1 600); do
    curl -fs -o /dev/null "$base/readyz" && [ "$(curl -fs "$base/api/bridge" | python3 -c 'import json,sys; print(json.load(sys.stdin)["info"].get("devices"))')" = "$devices" ] && break
    kill -0 "$daemon_pid" 2>/dev/null || { tail -n 30 "$out/daemon-page-$devices.log" >&2; exit 1; }
    sleep 0.2
  done
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$daemon_pid/status")
  for route in "/" "/districts/09162" "/api/devices?limit=25" "/api/devices?limit=25&q=0099999"; do
    for run in $(seq 1 "$RUNS"); do
      line=$(wrk -t1 -c1 -d"${PAGE_SECONDS:-5}s" --latency "$base$route" | tee -a "$out/wrk-page.log" | awk '/^    Latency/ {print $2} /^Requests\/sec/ {print $2}' | paste -sd' ')
      echo "mode=page devices=$devices route=$route latency=${line% *} rps=${line#* } rss_kib=$rss" | tee -a "$results"
    done
  done
  stop_pid "$daemon_pid"; daemon_pid=""
  stop_pid "${BROKER_PID:-}"; BROKER_PID=""
done

# The daemon benchmark without and with a scraper, alternating.
for round in $(seq 1 "$DAEMON_RUNS"); do
  order="0 1"; [ $((round % 2)) = 0 ] && order="1 0"
  for scrape in $order; do
    SCRAPE=$scrape RUNS=1 BIN_DIR=$bin RSS_DEVICES=${RSS_DEVICES:-0} Benchmarks/daemon/run.sh >"$out/daemon-bench-$round-$scrape.md" 2>>"$out/daemon-bench.log" || true
    grep '^mode=' benchmarks-out/daemon/results.txt | sed "s/^/scrape=$scrape /" >>"$results"
  done
done

python3 - "$results" "$RUNS" "$SECONDS_PER" "$CONNECTIONS" "$THREADS" "$DAEMON_RUNS" <<'PY'
import statistics, subprocess, sys, platform
path, runs, seconds, connections, threads, daemon_runs = sys.argv[1:]
rows = [dict(kv.split("=", 1) for kv in line.split()) for line in open(path) if "mode=" in line]
def med(values):
    return statistics.median(values) if values else float("nan")
def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
print()
print("Machine: %s, %s cores (`nproc`), %s GiB; %s; %s; %s" % (
    sh("lscpu | sed -n 's/^Model name: *//p'") or platform.processor(), sh("nproc"), sh("free -g | awk '/^Mem:/ {print $2}'"),
    platform.platform(), sh("swift --version 2>&1 | head -1"), sh("wrk -v 2>&1 | head -1")))
print("Command: `Benchmarks/http/run.sh` (RUNS=%s, wrk -t%s -c%s -d%ss; daemon benchmark %s rounds per variant)" % (
    runs, threads, connections, seconds, daemon_runs))
print()
noop = med([float(r["rps"]) for r in rows if r["mode"] == "wrk" and r["route"] == "noop"])
signal = med([float(r["rps"]) for r in rows if r["mode"] == "wrk" and r["route"] == "signal"])
print("| route | requests/s (median) |")
print("|---|---|")
print("| `/healthz` (do-nothing) | %.0f |" % noop)
print("| `/api/signal?lat=48.1374&lon=11.5755` | %.0f |" % signal)
print()
print("`/api/signal` / do-nothing: %.2f (goal >= 0.8)" % (signal / noop))
print()
def ms(text):
    for unit, factor in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float("nan")
pages = [r for r in rows if r["mode"] == "page"]
if pages:
    counts = sorted({r["devices"] for r in pages}, key=int)
    print("| route | " + " | ".join("ms with %s devices" % format(int(c), ",") for c in counts) + " |")
    print("|---|" + "---|" * len(counts))
    for route in dict.fromkeys(r["route"] for r in pages):
        cells = [med([ms(r["latency"]) for r in pages if r["route"] == route and r["devices"] == c]) for c in counts]
        print("| `%s` | %s |" % (route, " | ".join("%.2f" % v for v in cells)))
    print()
    print("RSS after start: " + ", ".join("%s devices %.1f MiB" % (format(int(c), ","), int(next(r["rss_kib"] for r in pages if r["devices"] == c)) / 1024) for c in counts))
    print()
print("| scraper | QoS | daemon msg/s | relay msg/s | daemon/relay | p99 ms at 1,000 msg/s |")
print("|---|---|---|---|---|---|")
for scrape in ("0", "1"):
    for qos in ("0", "1"):
        d = med([float(r["rate"]) for r in rows if r.get("scrape") == scrape and r["mode"] == "throughput" and r["target"] == "daemon" and r["qos"] == qos])
        rl = med([float(r["rate"]) for r in rows if r.get("scrape") == scrape and r["mode"] == "throughput" and r["target"] == "relay" and r["qos"] == qos])
        p99 = med([float(r["p99_ms"]) for r in rows if r.get("scrape") == scrape and r["mode"] == "latency" and r["target"] == "daemon"])
        print("| %s | %s | %.0f | %.0f | %.2f | %.3f |" % ("/metrics every 1 s" if scrape == "1" else "none", qos, d, rl, d / rl, p99))
PY
