#!/usr/bin/env bash
# Builds an earlier revision of Ampel in release (as deploy/ builds it), so that a benchmark can
# measure before and after in one run:
#
#   BASELINE_BIN=$(Benchmarks/build-baseline.sh 91d7a5a) Benchmarks/mqtt/run.sh
#   BASELINE_BIN=$(Benchmarks/build-baseline.sh 91d7a5a) Benchmarks/daemon/run.sh
#
# The revision is checked out as a detached worktree under benchmarks-out/baseline-<rev>/ (kept
# for the next run; `git worktree remove` it when done). Prints the directory of its binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: Benchmarks/build-baseline.sh REVISION}
commit=$(git rev-parse --short "$rev^{commit}")
dir=benchmarks-out/baseline-$commit
mkdir -p benchmarks-out
if [ ! -d "$dir" ]; then
  git worktree add --detach "$dir" "$commit" >&2
fi
(
  cd "$dir"
  swift build -c release --static-swift-stdlib --product AmpelBenchmarks >&2
  swift build -c release --static-swift-stdlib --product ampel >&2
)
(cd "$dir" && swift build -c release --static-swift-stdlib --show-bin-path)
