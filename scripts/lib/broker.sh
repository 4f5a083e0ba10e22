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
# deploy/mosquitto/mosquitto.conf; sets BROKER_PID, and returns once it accepts connections.
start_test_broker() {
  local dir=$1 port=$2 extra=${3:-}
  mkdir -p "$dir"
  cat > "$dir/mosquitto.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous true
persistence true
persistence_location $dir/
autosave_interval 300
max_queued_messages 100000
max_inflight_messages 1000
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

# stop_pid PID...: SIGTERM, then waits (the processes must be children of this shell).
stop_pid() {
  local p
  for p in "$@"; do
    [ -n "$p" ] || continue
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in "$@"; do
    [ -n "$p" ] || continue
    wait "$p" 2>/dev/null || true
  done
}
