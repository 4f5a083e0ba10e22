#!/usr/bin/env bash
# The main job: builds Ampel and shows the signal for München on bundled RKI data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --product ampel
.build/debug/ampel check --district 09162 "$@"
