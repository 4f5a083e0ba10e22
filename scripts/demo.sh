#!/usr/bin/env bash
# The README's main command: a complete local Ampel demo on this machine.
#
# Installs what is missing, builds `ampel`, starts a throw-away Mosquitto on a free loopback
# port (not the system service), runs the daemon on bundled RKI data of a day on which
# Bavarian districts differ in phase, drives four simulated devices along real GPS tracks
# across district and phase borders, and shows one device's lamp (`ampel lamp`) above a
# live log of alerts. Ctrl-C stops all of it.
#
#   scripts/demo.sh                 interactive (two panes in tmux; without tmux or a
#                                   terminal: the alert log only)
#   scripts/demo.sh --check [N]     no terminal needed: runs up to N seconds (default 30),
#                                   exits 0 once every device has a state and an alert
#                                   came, 1 if not (same as AMPEL_DEMO_SECONDS=N)
#   scripts/demo.sh --replay        the year instead of one day: `ampel replay` walks the
#                                   bundled history (2020-11-18 .. 2021-11-22), one publication
#                                   day per AMPEL_DEMO_DAY_SECONDS (default 2): the lamp and
#                                   the map change phase while the devices drive
#
# Environment: AMPEL_DEMO_DATE (default 2020-10-15: SK Augsburg yellow, LK Aichach-Friedberg
# green, LK Fürstenfeldbruck and SK München red, LK München yellow), AMPEL_DEMO_RATE (fixes
# per second per device, default 4), AMPEL_DEMO_TRIP (seconds per trip, default 90),
# AMPEL_BIN=path (use that ampel binary, build nothing), AMPEL_DEMO_HTTP=host:port (the HTTP
# server's address; default a free port on 127.0.0.1, printed as "status page and API: URL").
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=lib/broker.sh
source scripts/lib/broker.sh

check_seconds=${AMPEL_DEMO_SECONDS:-}
replay=""
case "${1:-}" in
  --check) check_seconds=${2:-${check_seconds:-30}} ;;
  --replay) replay=1 ;;
  -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
esac
date_=${AMPEL_DEMO_DATE:-2020-10-15}
rate=${AMPEL_DEMO_RATE:-4}
trip=${AMPEL_DEMO_TRIP:-90}
lamp_device=anna/car
devices=(anna/car ben/bike taxi1 van2)
say() { printf '\033[1mdemo:\033[0m %s\n' "$*" >&2; }

# --- Build ------------------------------------------------------------------------------
# Only what the demo runs (broker, MQTT client library, Python for the simulator, tmux): the
# test tools (Home Assistant, Chromium, Selenium, nats-server) come with scripts/test.sh.
scripts/install-base-deps.sh
if [ -n "${AMPEL_BIN:-}" ]; then
  bin=$AMPEL_BIN
else
  say "building ampel (the first build takes about two minutes on 2 cores)"
  # Without debug info (the demo needs no debugger): less to write for 1,130 compile jobs (1,821
  # before HTTP went through the system's libcurl instead of a TLS stack built here). From a
  # fresh clone on 2 cores the whole `scripts/demo.sh --check` took 2 m 12 s (5 m 44 s before).
  # scripts/test.sh builds with debug info, and so rebuilds once after this.
  swift build --product ampel -Xswiftc -gnone -Xcc -g0
  bin=$(swift build --product ampel -Xswiftc -gnone -Xcc -g0 --show-bin-path)/ampel
fi
[ -x "$bin" ] || { say "no ampel binary at $bin"; exit 1; }
if [[ $("$bin" run --help 2>&1) != *--broker* ]]; then
  say "this build of ampel has no 'run' command yet (the daemon, issue 6)"
  exit 1
fi

# --- Processes and their cleanup ----------------------------------------------------------
# Job control on: each background job below is its own process group (pipelines, the
# simulator's mosquitto_pub children), stopped as a group on exit, newest first. They do not
# get the terminal's Ctrl-C themselves; this script does, and stops them.
set -m
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-demo.XXXXXX")
tmux_sock=""
cleanup() {
  local rc=$?
  set +e
  trap '' INT TERM
  set +m # no "Terminated" notices for the jobs stopped now
  [ -n "$tmux_sock" ] && tmux -S "$tmux_sock" kill-server 2>/dev/null
  stop_jobs
  if [ $rc -ne 0 ] && [ -z "$check_seconds" ] && [ -s "$tmp/ampel.log" ]; then
    say "last lines of the daemon's log:"; tail -n 15 "$tmp/ampel.log" >&2
  fi
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- Broker ----------------------------------------------------------------------------
port=$(free_port)
start_test_broker "$tmp/broker" "$port"
track_job "$BROKER_PID"
broker=mqtt://127.0.0.1:$port
say "mosquitto on 127.0.0.1:$port (temp config, persistence in $tmp/broker)"

# --- The daemon ------------------------------------------------------------------------
# The HTTP server on a free port (AMPEL_DEMO_HTTP=host:port to choose one); its URL is in the log.
if [ -n "$replay" ]; then
  day_seconds=${AMPEL_DEMO_DAY_SECONDS:-2}
  AMPEL_HTTP=${AMPEL_DEMO_HTTP:-127.0.0.1:0} "$bin" replay --broker "$broker" --day-seconds "$day_seconds" --lang de --production-topics \
    --state-dir "$tmp/state" >"$tmp/ampel.log" 2>&1 &
  daemon_pid=$!
  say "ampel replay --broker $broker --day-seconds $day_seconds --lang de: 2020-11-18 .. 2021-11-22, a day every $day_seconds s (log: $tmp/ampel.log)"
else
  "$bin" run --broker "$broker" --source snapshot --date "$date_" --lang de --state-dir "$tmp/state" \
    --http "${AMPEL_DEMO_HTTP:-127.0.0.1:0}" >"$tmp/ampel.log" 2>&1 &
  daemon_pid=$!
  say "ampel run --broker $broker --source snapshot --date $date_ --lang de (log: $tmp/ampel.log)"
fi
track_job "$daemon_pid"
# Online when its retained bridge state says so (published after connect).
bridge=$(mosquitto_sub -h 127.0.0.1 -p "$port" -t ampel/bridge/state -C 1 -W 120 2>/dev/null || true)
if [[ $bridge != *online* ]]; then
  say "the daemon did not come online within 120 s"
  kill -0 "$daemon_pid" 2>/dev/null || say "it exited"
  tail -n 20 "$tmp/ampel.log" >&2
  exit 1
fi
say "daemon online"
url=$(sed -n 's|.*serving HTTP on \(http://[^ ]*\).*|\1|p' "$tmp/ampel.log" | head -n 1)
[ -n "$url" ] && say "status page and API: $url  (${url}api/districts, ${url}metrics; docs/http.md)"
if [ -n "$url" ] && [ -z "$check_seconds" ] && [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && command -v xdg-open >/dev/null; then
  xdg-open "$url" >/dev/null 2>&1 || true
fi

# --- Observers, subscribed before any device moves (alerts are not retained) ------------
# The alert log: mosquitto_sub -d prints its SUBACK, view.py turns it into a header line
# (stdbuf: mosquitto_sub would otherwise hold its lines in a full buffer when piped).
[ -t 1 ] && export AMPEL_DEMO_COLOR=1
stdbuf -oL mosquitto_sub -d -h 127.0.0.1 -p "$port" -q 1 -t 'ampel/device/+/alert' -t 'ampel/device/+/+/alert' -F '%t %x' \
  2>/dev/null | python3 -u scripts/demo/view.py alerts >"$tmp/alerts.log" &
track_job "$!"
wait_for_line "$tmp/alerts.log" '^time ' 15 || { say "alert subscriber did not start"; exit 1; }
if [ -n "$check_seconds" ]; then
  # Everything below ampel/, judged below by view.py watch.
  stdbuf -oL mosquitto_sub -d -h 127.0.0.1 -p "$port" -q 1 -t 'ampel/#' -F '%t %x' \
    >"$tmp/capture" 2>/dev/null &
  track_job "$!"
  wait_for_line "$tmp/capture" 'received SUBACK' 15 || { say "capture subscriber did not start"; exit 1; }
fi

# --- Simulated devices -------------------------------------------------------------------
python3 scripts/demo/simulate.py --port "$port" --rate "$rate" --trip-seconds "$trip" \
  ${check_seconds:+--quiet} 2>"$tmp/simulate.log" &
track_job "$!"
say "devices: owntracks/anna/car + owntracks/ben/bike (A5 Augsburg <-> München),"
say "         ampel/location/taxi1 + ampel/location/van2 (a car in München), $rate fixes/s each"

# --- Check mode ---------------------------------------------------------------------------
if [ -n "$check_seconds" ]; then
  say "checking for up to $check_seconds s"
  # view.py stops at its deadline or as soon as it has seen enough; tail then ends on its
  # next write (SIGPIPE).
  set +e
  tail -n +1 -f "$tmp/capture" | python3 -u scripts/demo/view.py watch "$check_seconds" "${devices[@]}"
  rc=${PIPESTATUS[1]}
  set -e
  if [ $rc -ne 0 ]; then
    say "alert log:"; cat "$tmp/alerts.log" >&2
    say "daemon log (last lines):"; tail -n 20 "$tmp/ampel.log" >&2
  fi
  say "$([ $rc -eq 0 ] && echo passed || echo FAILED)"
  exit $rc
fi

# --- Interactive: a lamp above the alert log -----------------------------------------------
if [[ $("$bin" lamp --help 2>&1) == *--device* ]]; then
  lamp_cmd="'$bin' lamp --broker '$broker' --device '$lamp_device'"
else
  # Until `ampel lamp` (issue 7) is in this build: the lamp drawn from the device's state.
  lamp_cmd="mosquitto_sub -h 127.0.0.1 -p $port -t 'ampel/device/$lamp_device/state' -t 'ampel/rules/#' -t ampel/bridge/state -F '%t %x' | python3 -u '$root/scripts/demo/view.py' lamp '$lamp_device'"
fi
if [ -t 0 ] && [ -t 1 ] && command -v tmux >/dev/null; then
  tmux_sock=$tmp/tmux.sock
  stop_all="tmux -S '$tmux_sock' kill-server"
  # Either pane ending (Ctrl-C in it) or detaching ends the session; then cleanup runs.
  env -u TMUX tmux -S "$tmux_sock" -f /dev/null new-session -d -s demo \
    -x "$(tput cols)" -y "$(tput lines)" "$lamp_cmd; $stop_all"
  tmux -S "$tmux_sock" split-window -v -l 40% -t demo "tail -n +1 -f '$tmp/alerts.log'; $stop_all"
  tmux -S "$tmux_sock" set -g status-style 'bg=colour236,fg=colour250' \; \
    set -g status-left " Ampel demo " \; set -g status-left-length 20 \; \
    set -g status-right " ${url:-}  Ctrl-C stops everything " \; set -g status-right-length 80 \; \
    bind -n C-c run-shell "$stop_all" \; select-pane -t demo.0 >/dev/null
  env -u TMUX tmux -S "$tmux_sock" attach -t demo || true
else
  say "no terminal or no tmux: showing the alert log only; for the lamp, in another terminal:"
  say "  $lamp_cmd"
  say "Ctrl-C stops everything"
  tail -n +1 -f "$tmp/alerts.log" &
  track_job "$!"
  wait "$!"
fi
