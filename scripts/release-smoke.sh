#!/usr/bin/env bash
# The binary as deployed (release, static Swift stdlib) started once against a real mosquitto:
# it comes online, checks its live source (unreachable here, so the bundled stand-in and the
# failure are reported), answers /readyz and stops cleanly on SIGTERM. The tests run the debug
# build; a fault only the optimised build has (a task-local that crashed the release runtime at
# the first data check, 2026-11-27) passes every test and kills every deployed daemon.
#
# Usage: scripts/release-smoke.sh   (builds the release binary; BIN_DIR=<dir> to use one built)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/broker.sh
source scripts/lib/broker.sh
# shellcheck source=lib/release.sh
source scripts/lib/release.sh
tmp=$(mktemp -d)
release_binaries "$tmp" ampel
daemon_pid=""; BROKER_PID=""
trap end_daemon_and_broker EXIT
fail() { echo "release smoke: $*" >&2; echo "--- daemon log:" >&2; cat "$tmp/daemon.log" >&2; exit 1; }

port=$(free_port)
start_test_broker "$tmp/broker" "$port"
closed=$(free_port)
"$bin/ampel" run --broker "mqtt://127.0.0.1:$port" --source rki --url "http://127.0.0.1:$closed/landkreise.csv" \
  --state-dir "$tmp/state" --http 127.0.0.1:0 >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
wait_for_line "$tmp/daemon.log" 'serving HTTP on' 30 "$daemon_pid" || fail "no HTTP server"
base=$(grep -o 'serving HTTP on http://[^ ]*' "$tmp/daemon.log" | head -1 | sed 's/serving HTTP on //; s#/$##')
wait_for_line "$tmp/daemon.log" 'subscribed' 30 "$daemon_pid" || fail "never subscribed"
# The first failed attempt shows within seconds; the daemon must still be alive for it.
python3 - "$base" <<'PY' || fail "/readyz did not report the failed check within 15 s"
import json, sys, time, urllib.request
deadline = time.time() + 15
while True:
    try:
        answer = json.load(urllib.request.urlopen(sys.argv[1] + "/readyz", timeout=5))
    except Exception as error:  # 503 while starting
        answer = json.load(error) if hasattr(error, "read") else {}
    data = answer.get("data") or {}
    if answer.get("status") == "ready" and data.get("lastError") and data.get("kind") == "stand-in":
        print("release smoke: ready;", data["lastError"])
        break
    if time.time() > deadline:
        print("last answer:", answer, file=sys.stderr)
        sys.exit(1)
    time.sleep(0.2)
PY
info=$(mosquitto_sub -p "$port" -t ampel/bridge/info -C 1 -W 10) || fail "no retained bridge/info"
case "$info" in *'"dataKind":"stand-in"'*) ;; *) fail "bridge/info: $info" ;; esac
kill -TERM "$daemon_pid"
status=0; wait "$daemon_pid" || status=$?
daemon_pid=""
[ "$status" -eq 0 ] || fail "exit status $status after SIGTERM"
echo "release smoke: passed ($bin/ampel)"
