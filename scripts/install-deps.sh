#!/usr/bin/env bash
# Installs what Ampel needs on a fresh Debian machine (Swift 6.3 itself is expected on PATH,
# e.g. /opt/swift/usr/bin). Idempotent: does nothing when everything is there.
set -euo pipefail
# python3-jsonschema: the OwnTracks schema check of the end-to-end tests (Tests/AmpelCLITests/Fixtures/owntracks).
packages=(mosquitto mosquitto-clients libmosquitto-dev pkg-config openssl python3 python3-venv python3-jsonschema tmux)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null || { echo "swift is not on PATH (Swift 6.3 toolchain needed)" >&2; exit 1; }
