# Shell helpers shared by Ampel's scripts (source it; bash only): free ports, waiting for a
# log line without sleeping, and a throw-away Mosquitto on loopback.

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on right now (the kernel
# picks it; the tiny window until the broker binds it is accepted).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for_line FILE REGEX SECONDS [PID]: returns 0 as soon as a line of FILE (already there
# or appended later) matches REGEX, 1 after SECONDS or when process PID has exited. Follows
# the file with `tail -F` (an event, not a poll loop) and always kills its tail.
wait_for_line() {
  local file=$1 regex=$2 seconds=$3 pid=${4:-} line rc=1 tailpid
  exec {_wfl_fd}< <(exec timeout "$seconds" tail -n +1 -F ${pid:+--pid="$pid"} "$file" 2>/dev/null)
  tailpid=$!
  while IFS= read -r -u "$_wfl_fd" line; do
    if [[ $line =~ $regex ]]; then rc=0; break; fi
  done
  kill "$tailpid" 2>/dev/null
  exec {_wfl_fd}<&-
  return $rc
}

# start_test_broker DIR PORT [EXTRA_CONF_LINES]: starts `mosquitto` on 127.0.0.1:PORT with
# persistence in DIR, anonymous access and the raised queue/in-flight limits of
# deploy/mosquitto/mosquitto.conf (BROKER_MAX_INFLIGHT overrides max_inflight_messages, which an
# MQTT 5 client such as the daemon takes as its own window from the CONNACK); sets BROKER_PID,
# and returns once it accepts connections.
start_test_broker() {
  local dir=$1 port=$2 extra=${3:-}
  mkdir -p "$dir"
  local user_line=""
  # Started as root, mosquitto drops to user "mosquitto", who cannot write a mktemp dir.
  [ "$(id -u)" -eq 0 ] && user_line="user root"
  cat > "$dir/mosquitto.conf" <<CONF
$user_line
listener $port 127.0.0.1
allow_anonymous true
persistence true
persistence_location $dir/
autosave_interval 300
max_queued_messages 100000
max_inflight_messages ${BROKER_MAX_INFLIGHT:-1000}
set_tcp_nodelay true
log_dest file $dir/mosquitto.log
log_type error
log_type warning
log_type notice
log_type information
$extra
CONF
  : > "$dir/mosquitto.log"
  mosquitto -c "$dir/mosquitto.conf" >"$dir/mosquitto.out" 2>&1 &
  BROKER_PID=$!
  if ! wait_for_line "$dir/mosquitto.log" 'mosquitto version .* running' 15 "$BROKER_PID"; then
    echo "mosquitto did not start; its log:" >&2
    cat "$dir/mosquitto.out" "$dir/mosquitto.log" >&2
    return 1
  fi
}

# stop_pid PID...: (safe under set -e) SIGTERM to each, then waits for each to exit (up to 15 s, by following
# the process with `tail --pid`), then SIGKILL for any still there.
stop_pid() {
  local p
  for p in "$@"; do
    [ -n "$p" ] && { kill -TERM "$p" 2>/dev/null || true; }
  done
  for p in "$@"; do
    [ -n "$p" ] || continue
    timeout 15 tail --pid="$p" -s 0.05 -f /dev/null 2>/dev/null || true
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  return 0
}

# Process groups: with job control on (`set -m`), every background job of a script is its
# own process group (a pipeline's members and the children they start included), so a
# whole job can be stopped without knowing its members. track_job records the job just
# started with `&`; stop_jobs stops all recorded jobs, newest first.
TRACKED_JOBS=()
track_job() { # [PID] (default $! of the caller, passed explicitly)
  local pid=$1 pgid
  pgid=$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ')
  TRACKED_JOBS+=("$pid:${pgid:-$pid}")
}
stop_jobs() {
  local i entry pid pgid
  for ((i = ${#TRACKED_JOBS[@]} - 1; i >= 0; i--)); do
    entry=${TRACKED_JOBS[i]}; pid=${entry%%:*}; pgid=${entry##*:}
    if [ "$pgid" != "$(ps -o pgid= -p $$ | tr -d ' ')" ]; then
      kill -TERM -- "-$pgid" 2>/dev/null || true
    else
      kill -TERM "$pid" 2>/dev/null || true
    fi
    timeout 15 tail --pid="$pid" -s 0.05 -f /dev/null 2>/dev/null || true
    if [ "$pgid" != "$(ps -o pgid= -p $$ | tr -d ' ')" ]; then
      kill -KILL -- "-$pgid" 2>/dev/null || true
    fi
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  TRACKED_JOBS=()
  return 0
}

# end_daemon_and_broker: an EXIT trap for a script that started one daemon ($daemon_pid) and a
# test broker ($BROKER_PID) in the scratch directory $tmp: stops both (stop_pid), removes $tmp.
# The daemon first: its stop says offline to the broker and waits for the acknowledgement.
end_daemon_and_broker() {
  stop_pid "${daemon_pid:-}"
  stop_pid "${BROKER_PID:-}"
  rm -rf "$tmp"
}
