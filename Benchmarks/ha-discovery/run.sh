#!/usr/bin/env bash
# Home Assistant discovery with 1,000 devices in both forms (`homeassistant.discovery: entity`
# and `device`): config messages and bytes the daemon sends, and Home Assistant 2025.4.4's time
# from its launch until its registry holds every Ampel entity. Two rounds, forms alternating.
# Needs scripts/install-deps.sh (the 2025.4.4 venv). Results: docs/benchmarks.md.
#
# Usage: Benchmarks/ha-discovery/run.sh   (AMPEL_HA_BENCH_ROUNDS=n for more rounds)
set -euo pipefail
cd "$(dirname "$0")/../.."
swift build --build-tests >/dev/null
AMPEL_HA_BENCH=1 swift test --skip-build --filter HomeAssistantDiscoveryBenchmark 2>&1 | grep -E "HomeAssistantDiscoveryBenchmark|round|✘|passed|failed"
