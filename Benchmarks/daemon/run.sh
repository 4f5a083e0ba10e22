#!/usr/bin/env bash
# Ampel daemon benchmark (issue 6), one command:
#
#   Benchmarks/daemon/run.sh                  # defaults below; override with env vars
#   RUNS=5 COUNT=100000 Benchmarks/daemon/run.sh
#
# Through one real mosquitto (set_tcp_nodelay, raised max_queued_messages and
# max_inflight_messages, as in deploy/mosquitto/mosquitto.conf), all release builds:
#  1. throughput: location messages per second through `ampel run` (each causing a state
#     publish) against a do-nothing relay client (AmpelBenchmarks daemon relay) in the same
#     run, at QoS 0 and QoS 1, alternating which goes first;
#  2. latency: p50/p99 from publishing a location to receiving its state, at a steady
#     1,000 msg/s (QoS 1), daemon and relay;
#  3. memory: VmRSS of a freshly started daemon after 100,000 devices reported once.
# Prints a Markdown section (machine, command, medians) and keeps the raw lines in
# benchmarks-out/daemon/. The daemon runs with outputs.device_state: every_fix (one state per
# fix); Benchmarks/daemon/fleet.sh compares every_fix, on_change and two C relays. If this build has no `ampel run` yet, measures the relay alone.
#
#   BASELINE_BIN=$(Benchmarks/build-baseline.sh REV) Benchmarks/daemon/run.sh   # before/after
#
# SCRAPE=1 asks the daemon's /metrics once a second throughout, as Prometheus would
# (Benchmarks/http/run.sh compares runs with and without it). The daemon's HTTP server listens
# on a free port either way.
#
# With BASELINE_BIN, the `ampel` of an earlier revision is measured in the same rotation as a
# third target (`baseline`); only one daemon runs at a time, each with its own state directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh

RUNS=${RUNS:-3}
DEVICES=${DEVICES:-5000}        # devices in the throughput test
COUNT=${COUNT:-50000}           # fixes per throughput measurement
WINDOW=${WINDOW:-500}           # fixes in flight (sent, state not yet back)
RATE=${RATE:-1000}              # latency: fixes per second
LAT_SECONDS=${LAT_SECONDS:-10}  # latency: duration
RSS_DEVICES=${RSS_DEVICES:-100000}
DATE=${DATE:-2020-10-15}

out=benchmarks-out/daemon
mkdir -p "$out"
release_binaries "$out"
bench=$bin/AmpelBenchmarks
ampel=$bin/ampel
have_daemon=1
[[ $("$ampel" run --help 2>&1) == *--broker* ]] || have_daemon=0
baseline_ampel=""
if [ -n "${BASELINE_BIN:-}" ]; then
  baseline_ampel=$BASELINE_BIN/ampel
  [ -x "$baseline_ampel" ] || { echo "no ampel in BASELINE_BIN=$BASELINE_BIN" >&2; exit 1; }
fi
running=""  # which daemon runs now: daemon or baseline

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-daemon-bench.XXXXXX")
daemon_pid=""; relay_pid=""; scraper_pid=""
cleanup() {
  set +e
  stop_pid "$scraper_pid" "$daemon_pid" "$relay_pid" "${BROKER_PID:-}"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(free_port)
http_port=$(free_port)
SCRAPE=${SCRAPE:-0}
start_test_broker "$tmp/broker" "$port"
broker=mqtt://127.0.0.1:$port

start_daemon() { # STATE_DIR [BINARY]
  # A restart of this build over devices it knows re-evaluates and announces them in paced
  # batches (docs/DESIGN.md, decision 48) for a few seconds; the figures are of the steady
  # state after it (a baseline build may have no such walk). Its cost is in the Scale section.
  local walk=0 http=()
  # An earlier build has no HTTP server (no --http flag).
  [[ $("${2:-$ampel}" run --help 2>&1) == *--http* ]] && http=(--http "127.0.0.1:$http_port")
  # Clear the retained bridge state of an earlier daemon, so the first one seen is this one's.
  mosquitto_pub -h 127.0.0.1 -p "$port" -q 1 -r -n -t ampel/bridge/state
  : >"$tmp/daemon-current.log"
  # Throughput and latency are measured from a fix to its state: every fix must publish one
  # (the default on_change publishes only what changed; Benchmarks/daemon/fleet.sh measures that).
  # A baseline build from before outputs.device_state refuses the key (and publishes every fix).
  local config=()
  printf 'outputs:\n  device_state: every_fix\n' >"$tmp/every-fix.yaml"
  if "${2:-$ampel}" run --config "$tmp/every-fix.yaml" --check-config >/dev/null 2>&1; then
    config=(--config "$tmp/every-fix.yaml")
    # A build that knows the key has the start walk too; one that refuses it is taken to have
    # none (true of 91d7a5a, the baseline of the earlier runs).
    if compgen -G "$1/journal-*.log" >/dev/null; then walk=1; fi
  fi
  # Read from disk as deployed, not from its link's (or the checks above') page cache.
  evict_from_page_cache "${2:-$ampel}"
  "${2:-$ampel}" run "${config[@]}" --broker "$broker" --source snapshot --date "$DATE" --state-dir "$1" "${http[@]}" \
    > >(tee -a "$out/daemon.log" >"$tmp/daemon-current.log") 2>&1 &
  daemon_pid=$!
  # Ready when its retained bridge state says online (event: the message arrives).
  local bridge
  bridge=$(mosquitto_sub -h 127.0.0.1 -p "$port" -t ampel/bridge/state -C 1 -W 120 2>/dev/null || true)
  if [[ $bridge != *online* ]] || ! kill -0 "$daemon_pid" 2>/dev/null; then
    echo "the daemon did not come online; its log:" >&2
    tail -n 30 "$out/daemon.log" >&2
    exit 1
  fi
  if [ $walk = 1 ] && ! wait_for_line "$tmp/daemon-current.log" 'every device re-evaluated' 300 "$daemon_pid"; then
    echo "the daemon's start walk did not end; its log:" >&2
    tail -n 30 "$out/daemon.log" >&2
    exit 1
  fi
}

: >"$out/daemon.log"
"$bench" daemon relay --port "$port" >"$out/relay.log" 2>&1 &
relay_pid=$!
wait_for_line "$out/relay.log" '^relay ready' 30 "$relay_pid" || { cat "$out/relay.log" >&2; exit 1; }
targets="relay"
if [ $have_daemon = 1 ]; then
  start_daemon "$tmp/state"
  running=daemon
  targets="daemon relay"
  [ -n "$baseline_ampel" ] && targets="daemon baseline relay"
else
  echo "NOTE: this build of ampel has no 'run' command: measuring the relay alone" >&2
fi

if [ "$SCRAPE" = 1 ]; then
  # Whichever daemon runs: one GET /metrics per second, its answer discarded.
  (while sleep 1; do curl -s -o /dev/null "http://127.0.0.1:$http_port/metrics" || true; done) &
  scraper_pid=$!
fi

results="$out/results.txt"
: >"$results"
# Runs one measurement against TARGET (daemon, baseline or relay); the baseline is measured as
# a daemon and labelled afterwards.
measure() { # TARGET ARGS...
  local target=$1; shift
  if [ "$target" = relay ]; then
    "$bench" daemon "$@" --port "$port" --target relay 2>>"$out/bench.log" | tee -a "$results"
    return
  fi
  if [ "$running" != "$target" ]; then
    stop_pid "$daemon_pid"; daemon_pid=""
    if [ "$target" = baseline ]; then start_daemon "$tmp/state-baseline" "$baseline_ampel"; else start_daemon "$tmp/state"; fi
    running=$target
  fi
  "$bench" daemon "$@" --port "$port" --target daemon 2>>"$out/bench.log" \
    | sed "s/target=daemon/target=$target/" | tee -a "$results"
}

for run in $(seq 1 "$RUNS"); do
  order=$targets
  # Alternate the order, so that drift on a shared machine hits every target alike.
  [ $((run % 2)) = 0 ] && order=$(echo "$targets" | tr ' ' '\n' | tac | tr '\n' ' ')
  for qos in 0 1; do
    for target in $order; do
      measure "$target" throughput --qos "$qos" --devices "$DEVICES" --count "$COUNT" --window "$WINDOW"
    done
  done
  for target in $order; do
    measure "$target" latency --qos 1 --rate "$RATE" --seconds "$LAT_SECONDS"
  done
done

# Memory: a fresh daemon (new state directory), then RSS_DEVICES devices once each (0: skipped).
if [ $have_daemon = 1 ] && [ "$RSS_DEVICES" -gt 0 ]; then
  for target in daemon $([ -n "$baseline_ampel" ] && echo baseline); do
    stop_pid "$daemon_pid"; daemon_pid=""
    if [ "$target" = baseline ]; then start_daemon "$tmp/state-rss-baseline" "$baseline_ampel"; else start_daemon "$tmp/state-rss"; fi
    "$bench" daemon rss --port "$port" --target daemon --pid "$daemon_pid" --devices "$RSS_DEVICES" \
      --window "$WINDOW" 2>>"$out/bench.log" | sed "s/^mode=rss /mode=rss which=$target /" | tee -a "$results"
  done
fi

python3 - "$results" "$RUNS" "$DEVICES" "$COUNT" "$WINDOW" "$RATE" "$LAT_SECONDS" "$have_daemon" <<'PY'
import statistics, subprocess, sys, platform
path, runs, devices, count, window, rate, lat_seconds, have_daemon = sys.argv[1:]
rows = [dict(kv.split("=", 1) for kv in line.split()) for line in open(path) if line.startswith("mode=")]
def pick(mode, target, qos=None):
    return [r for r in rows if r["mode"] == mode and r["target"] == target and (qos is None or r["qos"] == str(qos))]
def med(rs, key):
    values = [float(r[key]) for r in rs]
    return statistics.median(values) if values else float("nan")
def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
cpu = sh("lscpu | sed -n 's/^Model name: *//p'") or platform.processor()
mem = sh("free -g | awk '/^Mem:/ {print $2}'")
print()
print("Machine: %s, %s cores (`nproc`), %s GiB; %s; %s; mosquitto %s" % (
    cpu, sh("nproc"), mem, platform.platform(), sh("swift --version 2>&1 | head -1"),
    sh("mosquitto -h | sed -n 's/mosquitto version //p' | head -1")))
print("Command: `Benchmarks/daemon/run.sh` (RUNS=%s: medians of %s runs; throughput: %s fixes over %s devices, "
      "%s in flight; latency: %s fixes/s for %s s, QoS 1)" % (runs, runs, count, devices, window, rate, lat_seconds))
print()
targets = ["daemon", "relay"] if have_daemon == "1" else ["relay"]
if have_daemon == "1" and pick("throughput", "baseline"):
    targets = ["daemon", "baseline", "relay"]
print("| QoS | " + " | ".join("%s msg/s" % t for t in targets) + (" | daemon/relay (goal >= 0.9) |" if have_daemon == "1" else " |"))
print("|---|" + "---|" * len(targets) + ("---|" if have_daemon == "1" else ""))
for qos in (0, 1):
    values = [med(pick("throughput", t, qos), "rate") for t in targets]
    line = "| %d | " % qos + " | ".join("%.0f" % v for v in values)
    if have_daemon == "1":
        line += " | %.2f" % (values[0] / values[-1])
    print(line + " |")
print()
print("| latency at %s msg/s, QoS 1 | p50 ms | p90 ms | p99 ms (goal < 2) | max ms |" % rate)
print("|---|---|---|---|---|")
for t in targets:
    rs = pick("latency", t)
    print("| %s | %.3f | %.3f | %.3f | %.3f |" % (t, med(rs, "p50_ms"), med(rs, "p90_ms"), med(rs, "p99_ms"), med(rs, "max_ms")))
if "baseline" in targets:
    print()
    print("Before/after (this build against BASELINE_BIN, same run): throughput QoS 0 %.2f, QoS 1 %.2f; "
          "p99 latency %.3f ms against %.3f ms" % (
              med(pick("throughput", "daemon", 0), "rate") / med(pick("throughput", "baseline", 0), "rate"),
              med(pick("throughput", "daemon", 1), "rate") / med(pick("throughput", "baseline", 1), "rate"),
              med(pick("latency", "daemon"), "p99_ms"), med(pick("latency", "baseline"), "p99_ms")))
for r in [r for r in rows if r["mode"] == "rss"]:
    print()
    def mem(kb):  # VmRSS is in KiB; show MiB and 10^6 bytes, so "60 MB" cannot be read two ways
        return "%.1f MiB (%.1f MB)" % (int(kb) / 1024, int(kb) * 1024 / 1e6)
    settled = ("; %s %s s later" % (mem(r["rss_settled_kb"]), r["settle_s"])) if "rss_settled_kb" in r else ""
    print("Memory, %s: VmRSS %s after %s devices (goal < 60 MB; %s right after start%s, peak VmHWM %s; "
          "%s s to take them in)" % (r.get("which", "daemon"), mem(r["rss_kb"]), r["devices"], mem(r["rss_before_kb"]), settled,
                                     mem(r["hwm_kb"]), r["seconds"]))
PY
