#!/usr/bin/env bash
# Runs every test of Ampel: unit tests, tests against real mosquitto brokers started by the
# tests themselves, loopback HTTP fixture servers, and the built `ampel` binary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
swift test --skip-build "$@"
