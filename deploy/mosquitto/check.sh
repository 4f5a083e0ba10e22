#!/usr/bin/env bash
# Checks deploy/mosquitto/mosquitto.conf and deploy/mosquitto/acl against a real broker:
# starts a copy of the production config (paths moved to a temp dir, listeners moved to free
# loopback ports, a TLS CA and server certificate made with openssl), creates the users with
# mosquitto_passwd, and tries what each user may and may not do with mosquitto_pub/_sub.
# Prints one line per check and "N passed, N failed"; exits 1 if any failed. Cleans up its
# broker and temp files on every exit. Needs mosquitto, mosquitto-clients, openssl, python3.
#
#   deploy/mosquitto/check.sh          # -v: also show the broker log at the end
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/lib/broker.sh
source "$here/../../scripts/lib/broker.sh"
verbose=0; [ "${1:-}" = "-v" ] && verbose=1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-mqcheck.XXXXXX")
broker_pid=""
bg_pids=()
cleanup() {
  stop_pid "${bg_pids[@]}" "$broker_pid"
  [ $verbose -eq 1 ] && [ -f "$tmp/mosquitto.log" ] && cat "$tmp/mosquitto.log"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0; failed=0
pass() { passed=$((passed + 1)); printf 'ok    %s\n' "$1"; }
fail() { failed=$((failed + 1)); printf 'FAIL  %s%s\n' "$1" "${2:+ ($2)}"; }

p1=$(free_port); p2=$(free_port)
while [ "$p2" = "$p1" ]; do p2=$(free_port); done

# --- TLS material: a CA, a server certificate for localhost, and an unrelated CA ----------
mkdir -p "$tmp/certs" "$tmp/data"
(
  cd "$tmp/certs" || exit 1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=Ampel check CA" \
    -keyout ca.key -out ca.crt
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > san.ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile san.ext -out server.crt
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=Other CA" \
    -keyout other.key -out other.crt
) >"$tmp/openssl.log" 2>&1 || { cat "$tmp/openssl.log" >&2; echo "openssl failed" >&2; exit 1; }

# --- Users (one password each, as the README tells an operator to do) ----------------------
users=(ampel homeassistant monitor alice bob wled-rathaus tasmota-ampel-buero lamp-rathaus check-auditor)
pw() { printf 'pw-%s' "$1"; }
: > "$tmp/passwd"
for u in "${users[@]}"; do mosquitto_passwd -b "$tmp/passwd" "$u" "$(pw "$u")"; done

# The ACL under test, plus for the check only: every user may read sentinel/all (see below),
# and one user may read and write everything: it publishes what others should (not) read,
# and observes what others (could not) write.
sed -e '/^user /a topic read sentinel/all' "$here/acl" > "$tmp/acl"
printf '\n# check.sh only\nuser alice\ntopic read sentinel/all\nuser bob\ntopic read sentinel/all\n' >> "$tmp/acl"
printf 'user check-auditor\ntopic readwrite #\ntopic read $SYS/#\n' >> "$tmp/acl"

# --- The production config with test paths and ports ---------------------------------------
sed -e "s|^persistence_location .*|persistence_location $tmp/data/|" \
    -e "s|^password_file .*|password_file $tmp/passwd|" \
    -e "s|^acl_file .*|acl_file $tmp/acl|" \
    -e "s|^cafile .*|cafile $tmp/certs/ca.crt|" \
    -e "s|^certfile .*|certfile $tmp/certs/server.crt|" \
    -e "s|^keyfile .*|keyfile $tmp/certs/server.key|" \
    -e "s|^log_dest .*|log_dest file $tmp/mosquitto.log|" \
    -e "s|^listener 1883 127.0.0.1$|listener $p1 127.0.0.1|" \
    -e "s|^listener 8883$|listener $p2 127.0.0.1|" \
    "$here/mosquitto.conf" > "$tmp/mosquitto.conf"
# Started as root, mosquitto would drop to user "mosquitto", who cannot read the temp dir.
[ "$(id -u)" -eq 0 ] && sed -i '1i user root' "$tmp/mosquitto.conf"

# The copy must differ from the original only in those lines.
for key in persistence_location password_file acl_file cafile certfile keyfile log_dest; do
  if grep -q "^$key /etc\|^$key /var" "$tmp/mosquitto.conf"; then
    fail "config: $key moved to the temp dir" "still points to the system"
  fi
done
if grep -qx "listener $p1 127.0.0.1" "$tmp/mosquitto.conf" && grep -qx "listener $p2 127.0.0.1" "$tmp/mosquitto.conf"; then
  pass "config: listeners 1883 (loopback) and 8883 found and moved to free ports"
else
  fail "config: listeners 1883 (loopback) and 8883 found and moved to free ports" "expected 'listener 1883 127.0.0.1' and 'listener 8883'"
fi

start() {
  : > "$tmp/mosquitto.log"
  mosquitto -c "$tmp/mosquitto.conf" >"$tmp/mosquitto.out" 2>&1 &
  broker_pid=$!
  if wait_for_line "$tmp/mosquitto.log" 'mosquitto version .* running' 15 "$broker_pid"; then
    return 0
  fi
  cat "$tmp/mosquitto.out" "$tmp/mosquitto.log" >&2
  return 1
}
if start; then
  pass "broker starts on the production config"
else
  fail "broker starts on the production config"
  echo "$passed passed, $failed failed"; exit 1
fi
# (Except the warning about running as root, which only the `user root` above causes.)
warnings=$(grep -hiE 'error|warning' "$tmp/mosquitto.log" "$tmp/mosquitto.out" | grep -v 'should not be run as root')
if [ -n "$warnings" ]; then
  fail "broker starts without config warnings" "$(head -3 <<<"$warnings" | tr '\n' ' ')"
else
  pass "broker starts without config warnings"
fi

# --- Client helpers (plain listener unless told otherwise) ----------------------------------
pub() { # USER TOPIC PAYLOAD [extra args]
  local u=$1 t=$2 m=$3; shift 3
  mosquitto_pub -h 127.0.0.1 -p "$p1" -u "$u" -P "$(pw "$u")" -q 1 -t "$t" -m "$m" "$@"
}
clear() { # TOPIC: removes the retained message
  mosquitto_pub -h 127.0.0.1 -p "$p1" -u check-auditor -P "$(pw check-auditor)" -q 1 -t "$1" -r -n
}
first_topic() { # USER FILTER... : prints the topic of the first message received (5 s max)
  local u=$1; shift
  local args=() f
  for f in "$@"; do args+=(-t "$f"); done
  mosquitto_sub -h 127.0.0.1 -p "$p1" -u "$u" -P "$(pw "$u")" "${args[@]}" -C 1 -W 5 -F '%t' 2>/dev/null
}

# A retained sentinel that every user in these checks may read. The checks below subscribe to the topic
# under test first and the sentinel second in one SUBSCRIBE: the broker delivers retained
# messages in filter order, so receiving the sentinel first proves that nothing was there to
# receive on the topic under test, with no waiting for a timeout.
sentinel=sentinel/all
pub check-auditor "$sentinel" '{"state":"online"}' -r

# expect_write USER TOPIC yes|no: USER publishes a retained message; the auditor looks.
expect_write() {
  local u=$1 t=$2 want=$3 got name
  name="write: $u -> $t is $([ "$want" = yes ] && echo allowed || echo denied)"
  clear "$t" # what an earlier check left there
  pub "$u" "$t" "from $u" -r 2>/dev/null
  got=$(first_topic check-auditor "$t" "$sentinel")
  if { [ "$want" = yes ] && [ "$got" = "$t" ]; } || { [ "$want" = no ] && [ "$got" = "$sentinel" ]; }; then
    pass "$name"
  else
    fail "$name" "first message seen: '${got:-none}'"
  fi
}
# expect_read USER TOPIC yes|no: the auditor publishes a retained message; USER subscribes.
expect_read() {
  local u=$1 t=$2 want=$3 got name
  name="read:  $u <- $t is $([ "$want" = yes ] && echo allowed || echo denied)"
  case $t in \$SYS/*) ;; *) pub check-auditor "$t" "for $u" -r ;; esac
  got=$(first_topic "$u" "$t" "$sentinel")
  if { [ "$want" = yes ] && [ "$got" = "$t" ]; } || { [ "$want" = no ] && [ "$got" = "$sentinel" ]; }; then
    pass "$name"
  else
    fail "$name" "first message seen: '${got:-none}'"
  fi
}

# --- Devices: only their own location topics, only their own answers ----------------------
expect_write alice owntracks/alice/phone yes
expect_write alice owntracks/alice/phone/event yes
expect_write alice owntracks/bob/phone no
expect_write alice ampel/location/alice yes
expect_write alice ampel/location/bob no
expect_write alice ampel/device/alice/state no
expect_write alice ampel/district/09162/phase no
expect_write alice ampel/bridge/state no
expect_write alice homeassistant/sensor/ampel_09162/config no
expect_write alice wled/rathaus/col no
expect_write alice cmnd/ampel-buero/Color no
expect_read alice ampel/device/alice/state yes
expect_read alice ampel/device/alice/phone/alert yes
expect_read alice owntracks/alice/phone/cmd yes
expect_read alice ampel/device/bob/state no
expect_read alice ampel/device/alicex/state no
expect_read alice owntracks/bob/phone no
expect_read alice ampel/location/bob no
expect_read alice ampel/district/09162/phase no
expect_read alice ampel/bridge/info no
expect_read alice homeassistant/sensor/ampel_09162/config no
expect_read bob ampel/device/alice/phone/state no

# --- The daemon: reads the inputs, writes ampel/#, discovery and lamp commands ------------
expect_read ampel owntracks/alice/phone yes
expect_read ampel ampel/location/alice yes
expect_read ampel traccar/positions yes
expect_read ampel homeassistant/status yes
expect_read ampel wled/rathaus/status yes
expect_read ampel tele/ampel-buero/LWT yes
expect_write ampel ampel/device/alice/phone/state yes
expect_write ampel ampel/district/09162/phase yes
expect_write ampel ampel/bridge/info yes
expect_write ampel homeassistant/sensor/ampel_09162/config yes
expect_write ampel wled/rathaus/col yes
expect_write ampel cmnd/ampel-buero/Color yes
expect_write ampel owntracks/alice/phone no
# Alerts to the OwnTracks apps: the daemon writes as device `ampel` of each user, and only there.
expect_write ampel owntracks/alice/ampel/event yes
expect_write ampel owntracks/alice/ampel/info yes
expect_write ampel owntracks/alice/phone/event no
expect_read alice owntracks/alice/ampel/event yes
expect_read alice owntracks/alice/ampel/info yes
expect_read bob owntracks/alice/ampel/event no
expect_read bob owntracks/alice/ampel/info no

# --- Home Assistant: reads ampel/# and homeassistant/#, writes only its status ------------
expect_read homeassistant ampel/device/alice/phone/state yes
expect_read homeassistant ampel/district/09162/state yes
expect_read homeassistant homeassistant/sensor/ampel_09162/config yes
expect_read homeassistant owntracks/alice/phone no
expect_write homeassistant homeassistant/status yes
expect_write homeassistant ampel/device/alice/state no
expect_write homeassistant ampel/location/alice no
expect_write homeassistant homeassistant/sensor/ampel_09162/config no

# --- Lamps and monitoring -------------------------------------------------------------------
expect_read wled-rathaus wled/rathaus/col yes
expect_read wled-rathaus wled/other/col no
expect_write wled-rathaus wled/rathaus/status yes
expect_write wled-rathaus wled/other/status no
expect_read tasmota-ampel-buero cmnd/ampel-buero/Color yes
expect_read tasmota-ampel-buero cmnd/other/Color no
expect_write tasmota-ampel-buero tele/ampel-buero/LWT yes
expect_read lamp-rathaus ampel/district/09162/phase yes
expect_read lamp-rathaus ampel/bridge/state yes
expect_read lamp-rathaus ampel/district/09162/state no
expect_read lamp-rathaus ampel/device/alice/state no
expect_read monitor ampel/bridge/info yes
expect_read monitor '$SYS/broker/version' yes
expect_read monitor ampel/device/alice/state no
expect_write monitor ampel/bridge/state no

# --- Authentication -------------------------------------------------------------------------
if mosquitto_pub -h 127.0.0.1 -p "$p1" -t ampel/location/anon -m x 2>/dev/null; then
  fail "auth: anonymous client refused"
else
  pass "auth: anonymous client refused"
fi
if mosquitto_pub -h 127.0.0.1 -p "$p1" -u alice -P wrong -t ampel/location/alice -m x 2>/dev/null; then
  fail "auth: wrong password refused"
else
  pass "auth: wrong password refused"
fi

# --- TLS listener -----------------------------------------------------------------------------
tls=(-h localhost -p "$p2" --cafile "$tmp/certs/ca.crt")
if mosquitto_pub "${tls[@]}" -u alice -P "$(pw alice)" -q 1 -r -t owntracks/alice/tls -m x 2>"$tmp/tls.err" \
   && [ "$(first_topic check-auditor owntracks/alice/tls "$sentinel")" = owntracks/alice/tls ]; then
  pass "tls: device publishes over TLS with password (no client certificate)"
else
  fail "tls: device publishes over TLS with password (no client certificate)" "$(head -c 200 "$tmp/tls.err")"
fi
if mosquitto_pub -h localhost -p "$p2" --cafile "$tmp/certs/other.crt" -u alice -P "$(pw alice)" -t owntracks/alice/tls -m x 2>/dev/null; then
  fail "tls: server certificate from an unknown CA refused by the client"
else
  pass "tls: server certificate from an unknown CA refused by the client"
fi
if mosquitto_pub -h 127.0.0.1 -p "$p2" -u alice -P "$(pw alice)" -t owntracks/alice/tls -m x 2>/dev/null; then
  fail "tls: plain MQTT refused on the TLS port"
else
  pass "tls: plain MQTT refused on the TLS port"
fi
if mosquitto_pub "${tls[@]}" -t owntracks/alice/tls -m x 2>/dev/null; then
  fail "tls: anonymous refused on the TLS port"
else
  pass "tls: anonymous refused on the TLS port"
fi

# --- Shared subscriptions (several daemons, `$share/ampel/...`) -----------------------------
# Retained messages are never sent to shared subscriptions, so this waits for the SUBACK
# (debug output) before publishing.
shared_first() { # USER FILTER : subscribes, then prints the first topic received (5 s max)
  local u=$1 f=$2 out=$tmp/shared.$RANDOM
  : > "$out"
  mosquitto_sub -d -h 127.0.0.1 -p "$p1" -u "$u" -P "$(pw "$u")" -t "$f" -C 1 -W 5 -F 'TOPIC %t' >"$out" 2>&1 &
  local sp=$!
  bg_pids+=("$sp")
  wait_for_line "$out" 'received SUBACK' 5 "$sp" || true
  shift 2
  "$@" # publishes
  wait "$sp" 2>/dev/null
  sed -n 's/^TOPIC //p' "$out"
}
got=$(shared_first ampel '$share/ampel/owntracks/+/+' pub alice owntracks/alice/phone '{"_type":"location"}')
if [ "$got" = owntracks/alice/phone ]; then
  pass "shared: the daemon receives device locations on \$share/ampel/owntracks/+/+"
else
  fail "shared: the daemon receives device locations on \$share/ampel/owntracks/+/+" "got '${got:-nothing}'"
fi
pub_two() { pub bob owntracks/bob/phone x; pub alice owntracks/alice/phone y; }
got=$(shared_first alice '$share/spy/owntracks/+/+' pub_two)
if [ "$got" = owntracks/alice/phone ]; then
  pass "shared: a device's shared subscription does not get other users' locations"
else
  fail "shared: a device's shared subscription does not get other users' locations" "got '${got:-nothing}'"
fi

# --- Persistence: retained messages survive a broker restart --------------------------------
stop_pid "$broker_pid"; broker_pid=""
if [ -s "$tmp/data/mosquitto.db" ]; then
  pass "persistence: mosquitto.db written to persistence_location on shutdown"
else
  fail "persistence: mosquitto.db written to persistence_location on shutdown"
fi
if start && [ "$(first_topic alice ampel/device/alice/state "$sentinel")" = ampel/device/alice/state ]; then
  pass "persistence: retained state still there after a restart"
else
  fail "persistence: retained state still there after a restart"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
