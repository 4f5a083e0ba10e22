#!/usr/bin/env bash
# Installs what building Ampel and running it and its demo need on a fresh Debian machine
# (Swift 6.3 itself is expected on PATH, e.g. /opt/swift/usr/bin), and nothing the tests alone
# use: scripts/demo.sh runs this; scripts/install-deps.sh adds the test tools (a newcomer's
# first command took minutes installing Home Assistant, Chromium and Selenium, issue 29).
#
#   scripts/install-base-deps.sh [PACKAGE ...]   also the Debian packages named, in the same
#                                                apt run (scripts/install-deps.sh's test tools)
#
# Idempotent: asks apt for nothing when every package is there.
set -euo pipefail
# mosquitto, mosquitto-clients: the demo's throw-away broker, its mosquitto_sub observers and
# the simulator's mosquitto_pub (scripts/demo.sh, scripts/demo/simulate.py).
# libmosquitto-dev, pkg-config: the MQTT client library, found through pkg-config (Package.swift, CMosquitto).
# libcurl4-openssl-dev: the HTTP client (RKI data, webhooks; Sources/CAmpelCurl) links -lcurl;
# ca-certificates: the CAs its HTTPS trusts.
# python3: the demo's simulator and views, and the free-port helper (scripts/lib/broker.sh).
# tmux: the interactive demo's two panes (the lamp above the alert log).
packages=(mosquitto mosquitto-clients libmosquitto-dev pkg-config libcurl4-openssl-dev ca-certificates python3 tmux "$@")
missing=()
for p in "${packages[@]}"; do
  # Installed, not merely known: a package removed without --purge keeps a status entry
  # ("deinstall ok config-files") that `dpkg -s` answers with success.
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
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
