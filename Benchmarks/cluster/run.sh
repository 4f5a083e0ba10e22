#!/usr/bin/env bash
# Ampel on a clustered broker (issue 17), one command:
#
#   Benchmarks/cluster/run.sh                 # defaults below; override with env vars
#   RUNS=5 COUNT=50000 Benchmarks/cluster/run.sh
#
# The load generator of the daemon benchmark (AmpelBenchmarks daemon throughput|latency, QoS 1)
# against three set-ups, one at a time, in the same run and in alternating order:
#  - mosquitto-1: one daemon on one mosquitto (the baseline: the figures of docs/benchmarks.md
#    "Daemon", measured again here on the same machine and load);
#  - cluster-1: one daemon on a 3-node nats-server cluster (MQTT 3.1.1, JetStream), its broker
#    list n1,n2,n3 (on n1); fixes go in through n3, states are read on n2, so every message
#    crosses the cluster's routes;
#  - cluster-2: two partitioned daemons on the cluster (ampel/location/part0/+ on n1,
#    ampel/location/part1/+ on n2, own client ids, state directories and bridge topics, one
#    with outputs.districts), the devices spread over both.
# Prints a Markdown section (machine, load, command, medians, ratios to mosquitto-1) and keeps
# the raw lines in benchmarks-out/cluster/.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/broker.sh
source scripts/lib/broker.sh

RUNS=${RUNS:-3}
DEVICES=${DEVICES:-2000}       # devices in the throughput test
COUNT=${COUNT:-20000}          # fixes per throughput measurement
WINDOW=${WINDOW:-500}          # fixes in flight (sent, state not yet back)
RATE=${RATE:-500}              # latency: fixes per second
LAT_SECONDS=${LAT_SECONDS:-10} # latency: duration
DATE=${DATE:-2020-10-15}

out=benchmarks-out/cluster
mkdir -p "$out"
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh
release_binaries "$out"
bench=$bin/AmpelBenchmarks
ampel=$bin/ampel
command -v nats-server >/dev/null || { echo "nats-server is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-cluster-bench.XXXXXX")
daemon_pids=(); nats_pids=()
cleanup() {
  set +e
  stop_pid "${daemon_pids[@]}" "${nats_pids[@]}" "${BROKER_PID:-}"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The baseline broker.
mosq_port=$(free_port)
start_test_broker "$tmp/mosquitto" "$mosq_port"

# Three nats-server nodes: server_name, a cluster block with routes, JetStream (which MQTT needs).
declare -a client_ports route_ports mqtt_ports
for i in 0 1 2; do
  client_ports[i]=$(free_port); route_ports[i]=$(free_port); mqtt_ports[i]=$(free_port)
done
for i in 0 1 2; do
  routes=""
  for j in 0 1 2; do [ "$j" = "$i" ] || routes+="${routes:+, }nats-route://127.0.0.1:${route_ports[j]}"; done
  mkdir -p "$tmp/n$i/store"
  cat >"$tmp/n$i/nats.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:${client_ports[i]}
jetstream { store_dir: "$tmp/n$i/store" }
cluster { name: ampel-bench, listen: 127.0.0.1:${route_ports[i]}, routes: [$routes] }
mqtt { listen: 127.0.0.1:${mqtt_ports[i]}, stream_replicas: 3 }
CONF
  nats-server -c "$tmp/n$i/nats.conf" >"$tmp/n$i/nats.log" 2>&1 &
  nats_pids+=($!)
done
for i in 0 1 2; do
  wait_for_line "$tmp/n$i/nats.log" '(new metadata leader|is new JetStream cluster metadata leader)' 60 "${nats_pids[i]}" \
    || { echo "nats-server n$i did not join the cluster:" >&2; tail -n 20 "$tmp/n$i/nats.log" >&2; exit 1; }
  # The first MQTT client of a node creates the account's MQTT streams; returns once it can publish.
  mosquitto_pub -V mqttv311 -h 127.0.0.1 -p "${mqtt_ports[i]}" -q 1 -t ampel-bench/probe -m x
done
cluster_list="mqtt://127.0.0.1:${mqtt_ports[0]},mqtt://127.0.0.1:${mqtt_ports[1]},mqtt://127.0.0.1:${mqtt_ports[2]}"
rotated_list="mqtt://127.0.0.1:${mqtt_ports[1]},mqtt://127.0.0.1:${mqtt_ports[2]},mqtt://127.0.0.1:${mqtt_ports[0]}"

start_daemon() { # NAME BROKERS PORT PROTOCOL_OPTION YAML
  local name=$1 brokers=$2 port=$3 v=$4 yaml=$5 bridge
  mkdir -p "$tmp/$name"
  printf '%s\n' "$yaml" >"$tmp/$name/ampel.yaml"
  # The load generator waits for a state per fix: every fix must publish one (the default
  # on_change publishes only what changed).
  if grep -q '^outputs:' "$tmp/$name/ampel.yaml"; then
    sed -i 's/^outputs:$/outputs:\n  device_state: every_fix/' "$tmp/$name/ampel.yaml"
  else
    printf 'outputs:\n  device_state: every_fix\n' >>"$tmp/$name/ampel.yaml"
  fi
  local topic
  topic=$(sed -n 's/^bridge_topic: //p' "$tmp/$name/ampel.yaml"); topic=${topic:-ampel/bridge}/state
  # shellcheck disable=SC2086
  mosquitto_pub $v -h 127.0.0.1 -p "$port" -q 1 -r -n -t "$topic"
  "$ampel" run --config "$tmp/$name/ampel.yaml" --broker "$brokers" --source snapshot --date "$DATE" \
    --state-dir "$tmp/$name/state" --http false >>"$out/daemon-$name.log" 2>&1 &
  daemon_pids+=($!)
  # shellcheck disable=SC2086
  bridge=$(mosquitto_sub $v -h 127.0.0.1 -p "$port" -t "$topic" -C 1 -W 120 2>/dev/null || true)
  [[ $bridge == *online* ]] || { echo "daemon $name did not come online:" >&2; tail -n 30 "$out/daemon-$name.log" >&2; exit 1; }
}

start_setup() { # SETUP
  case $1 in
    mosquitto-1) start_daemon m1 "mqtt://127.0.0.1:$mosq_port" "$mosq_port" "" "mqtt:
  client_id: ampel-m1" ;;
    cluster-1) start_daemon c1 "$cluster_list" "${mqtt_ports[0]}" "-V mqttv311" "mqtt:
  protocol: \"3.1.1\"
  client_id: ampel-c1" ;;
    cluster-2)
      start_daemon p0 "$cluster_list" "${mqtt_ports[0]}" "-V mqttv311" "mqtt:
  protocol: \"3.1.1\"
  client_id: ampel-part0
bridge_topic: ampel/bridge/part0
inputs:
  owntracks: false
  plain: ampel/location/part0/+"
      start_daemon p1 "$rotated_list" "${mqtt_ports[1]}" "-V mqttv311" "mqtt:
  protocol: \"3.1.1\"
  client_id: ampel-part1
bridge_topic: ampel/bridge/part1
outputs:
  districts: false
inputs:
  owntracks: false
  plain: ampel/location/part1/+" ;;
  esac
}

stop_setup() {
  stop_pid "${daemon_pids[@]}"
  daemon_pids=()
}

load_options() { # SETUP -> the load generator's broker options
  case $1 in
    mosquitto-1) echo "--port $mosq_port" ;;
    cluster-1) echo "--port ${mqtt_ports[2]} --observe-port ${mqtt_ports[1]} --protocol 3.1.1" ;;
    cluster-2) echo "--port ${mqtt_ports[2]} --observe-port ${mqtt_ports[1]} --protocol 3.1.1 --partitions 2" ;;
  esac
}

results="$out/results.txt"
: >"$results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
setups="mosquitto-1 cluster-1 cluster-2"
for run in $(seq 1 "$RUNS"); do
  order=$setups
  [ $((run % 2)) = 0 ] && order=$(echo "$setups" | tr ' ' '\n' | tac | tr '\n' ' ')
  for setup in $order; do
    start_setup "$setup"
    # shellcheck disable=SC2046
    "$bench" daemon throughput --qos 1 --devices "$DEVICES" --count "$COUNT" --window "$WINDOW" $(load_options "$setup") \
      2>>"$out/bench.log" | sed "s/target=daemon/target=$setup/" | tee -a "$results"
    # shellcheck disable=SC2046
    "$bench" daemon latency --qos 1 --rate "$RATE" --seconds "$LAT_SECONDS" $(load_options "$setup") \
      2>>"$out/bench.log" | sed "s/target=daemon/target=$setup/" | tee -a "$results"
    stop_setup
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$results" "$RUNS" "$DEVICES" "$COUNT" "$WINDOW" "$RATE" "$LAT_SECONDS" "$load_before" "$load_after" <<'PY'
import statistics, subprocess, sys, platform
path, runs, devices, count, window, rate, lat_seconds, load_before, load_after = sys.argv[1:]
rows = [dict(kv.split("=", 1) for kv in line.split()) for line in open(path) if line.startswith("mode=")]
def pick(mode, target):
    return [r for r in rows if r["mode"] == mode and r["target"] == target]
def med(rs, key):
    values = [float(r[key]) for r in rs]
    return statistics.median(values) if values else float("nan")
def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
cpu = sh("lscpu | sed -n 's/^Model name: *//p'") or platform.processor()
print()
print("Machine: %s, %s cores (`nproc`), %s GiB; %s; mosquitto %s; %s; load average %s before, %s after" % (
    cpu, sh("nproc"), sh("free -g | awk '/^Mem:/ {print $2}'"), platform.platform(),
    sh("mosquitto -h | sed -n 's/mosquitto version //p' | head -1"), sh("nats-server --version"), load_before, load_after))
print("Command: `Benchmarks/cluster/run.sh` (RUNS=%s: medians of %s runs; throughput: %s QoS 1 fixes over %s devices, "
      "%s in flight; latency: %s fixes/s for %s s, QoS 1)" % (runs, runs, count, devices, window, rate, lat_seconds))
print()
print("| set-up | throughput msg/s | vs mosquitto-1 | p50 ms | p99 ms | max ms |")
print("|---|---|---|---|---|---|")
base = med(pick("throughput", "mosquitto-1"), "rate")
for t in ("mosquitto-1", "cluster-1", "cluster-2"):
    thr = med(pick("throughput", t), "rate")
    lat = pick("latency", t)
    print("| %s | %.0f | %.3f | %.3f | %.3f | %.3f |" % (t, thr, thr / base, med(lat, "p50_ms"), med(lat, "p99_ms"), med(lat, "max_ms")))
PY
