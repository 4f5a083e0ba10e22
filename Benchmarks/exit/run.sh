#!/usr/bin/env bash
# SIGTERM-to-reaped time of a process with one sleeping thread in a normal class, SCHED_IDLE or
# nice 19, while BUSY (default 4) busy loops share its CPU (all pinned to CPU 0). The baseline is
# the normal thread, measured in the same run. Results: docs/benchmarks.md, "Exit".
#
# Usage: Benchmarks/exit/run.sh [BUSY] [ROUNDS]
set -euo pipefail
busy=${1:-4}
rounds=${2:-10}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
cc -O2 -pthread -o "$dir/idle-thread-exit" "$(dirname "$0")/idle-thread-exit.c"
for _ in $(seq "$busy"); do taskset -c 0 sh -c 'while :; do :; done' & done
sleep 1
echo "$(nproc) cores, $busy busy loops on CPU 0, kernel $(uname -r)"
for mode in 0 1 2; do taskset -c 0 "$dir/idle-thread-exit" "$mode" "$rounds"; done
