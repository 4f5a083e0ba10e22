#!/usr/bin/env bash
# The journal's record checksum, one command:
#
#   BUILD_LOCK=/tmp/ampel-build.lock Benchmarks/journal/run.sh      # ROUNDS=9 by default
#
# CRC-32C by the table (the daemon's code before it used the CPU's instruction) against the
# instruction, in one process, alternating, medians (Sources/AmpelBenchmarks/JournalBenchmark.swift).
# Release build with --static-swift-stdlib, as the daemon ships. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh
ROUNDS=${ROUNDS:-9}
out=benchmarks-out/journal
mkdir -p "$out"
release_binaries "$out" AmpelBenchmarks
"$bin/AmpelBenchmarks" journal --rounds "$ROUNDS" | tee "$out/results.md"
