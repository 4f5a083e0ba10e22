#!/usr/bin/env bash
# Installs what Ampel's tests need on a fresh Debian machine (Swift 6.3 itself is expected on
# PATH, e.g. /opt/swift/usr/bin): what scripts/install-base-deps.sh installs for building and
# the demo, the test tools beside it, and Home Assistant core and Selenium in cached venvs.
# Run by scripts/test.sh and .ci/run; the demo runs scripts/install-base-deps.sh alone.
# Idempotent: does nothing when everything is there.
set -euo pipefail
# Test tools only, installed with the base packages in one apt run:
# openssl: the TLS test certificates (Tests/AmpelTestSupport/TLSTestCertificates.swift) and deploy/mosquitto/check.sh.
# python3-venv: the Home Assistant and Selenium venvs below.
# python3-jsonschema: the OwnTracks schema check of the end-to-end tests (Tests/AmpelCLITests/Fixtures/owntracks).
# python3-prometheus-client: the `/metrics` test parses the exposition with the reference parser (Tests/AmpelCLITests/RunHTTPTests.swift).
# nats-server (2.9): the clustered MQTT broker of the cluster tests and benchmark (Tests/AmpelTestSupport/NatsCluster.swift, docs/deploy.md).
# chromium, chromium-driver: the status page's browser test (Tests/AmpelCLITests/PageBrowserTests.swift).
# rabbitmq-server (3.10, MQTT 3.1.1 through its rabbitmq_mqtt plugin): the RabbitMQ end-to-end test, which starts a node of
#   its own on free ports (Tests/AmpelTestSupport/RabbitMQBroker.swift, docs/deploy.md); the package's own service is not used.
# lintian: the package check (scripts/package-check.sh).
packages=(openssl python3-venv python3-jsonschema python3-prometheus-client
  chromium chromium-driver nats-server rabbitmq-server lintian)
"$(dirname "$0")/install-base-deps.sh" "${packages[@]}"

# Home Assistant core in a venv, for scripts/ha-validate.py (the discovery configs checked with
# Home Assistant's own schemas, docs/homeassistant.md). Cached per version: installed once
# (about 2 minutes, 35 MB of wheels from PyPI), then only checked. `.complete` is written last,
# so an install cut short is redone. AMPEL_HA_VENV overrides the directory.
ha_version=2024.3
ha_venv="${AMPEL_HA_VENV:-$HOME/.cache/ampel/ha-venv-$ha_version}"
if [ ! -f "$ha_venv/.complete" ]; then
  echo "installing homeassistant==$ha_version.* into $ha_venv" >&2
  rm -rf "$ha_venv"
  mkdir -p "$(dirname "$ha_venv")"
  python3 -m venv "$ha_venv"
  "$ha_venv/bin/pip" install --quiet "homeassistant==$ha_version.*"
  "$ha_venv/bin/python" -c "import homeassistant.components.mqtt.sensor, homeassistant.components.mqtt.event"
  touch "$ha_venv/.complete"
fi

# What a running Home Assistant imports besides its schemas (Tests/AmpelCLITests/HomeAssistantRunningTests.swift):
# the requirements of the integrations it loads without default_config (frontend, onboarding,
# backup, hardware, the recorder that analytics imports, MQTT and the camera and image platforms
# MQTT sets up), which Home Assistant would otherwise install from PyPI at its first start (the
# test runs it with --skip-pip), pinned as in their manifests and its package_constraints.txt.
# josepy<2: acme 2.8 (Home Assistant Cloud, imported by the HTTP server) needs josepy's ComparableX509.
if [ ! -f "$ha_venv/.complete-running" ]; then
  echo "installing what a running Home Assistant $ha_version loads into $ha_venv" >&2
  ha_constraints="$("$ha_venv/bin/python" -c 'import homeassistant, os; print(os.path.dirname(homeassistant.__file__))')/package_constraints.txt"
  "$ha_venv/bin/pip" install --quiet -c "$ha_constraints" paho-mqtt==1.6.1 janus==1.0.0 home-assistant-frontend==20240307.0 \
    securetar==2024.2.1 psutil-home-assistant==0.0.1 Pillow==10.2.0 SQLAlchemy==2.0.27 fnv-hash-fast==0.5.0 PyTurboJPEG==1.7.1 \
    josepy==1.14.0
  "$ha_venv/bin/python" -c "import paho.mqtt.client, hass_frontend, hass_nabucasa, sqlalchemy, turbojpeg"
  touch "$ha_venv/.complete-running"
fi

# Home Assistant 2025.4.4, the newest that installs on Debian 12's machines, on Python 3.13 (it
# needs >= 3.13; Debian 12 has 3.11): for the running Home Assistant test with both discovery
# forms (Tests/AmpelCLITests/HomeAssistantRunningTests.swift). Made from AMPEL_PYTHON313, else
# the machine image's pyenv build; without a Python 3.13 the test says so and skips that release.
ha_new_version=2025.4.4
ha_new_venv="${AMPEL_HA_VENV_2025:-$HOME/.cache/ampel/ha-venv-$ha_new_version}"
python313="${AMPEL_PYTHON313:-/root/.pyenv/versions/3.13.0/bin/python3}"
if [ ! -f "$ha_new_venv/.complete-running" ]; then
  if [ -x "$python313" ]; then
    echo "installing homeassistant==$ha_new_version and what it loads into $ha_new_venv" >&2
    rm -rf "$ha_new_venv"
    mkdir -p "$(dirname "$ha_new_venv")"
    "$python313" -m venv "$ha_new_venv"
    "$ha_new_venv/bin/pip" install --quiet "homeassistant==$ha_new_version"
    ha_constraints="$("$ha_new_venv/bin/python" -c 'import homeassistant, os; print(os.path.dirname(homeassistant.__file__))')/package_constraints.txt"
    # The requirements of the integrations a bare start loads (their manifests), as for 2024.3 above.
    "$ha_new_venv/bin/pip" install --quiet -c "$ha_constraints" paho-mqtt==2.1.0 home-assistant-frontend==20250411.0 cronsim==2.6 \
      securetar==2025.2.1 psutil-home-assistant==0.0.1 SQLAlchemy==2.0.39 fnv-hash-fast==1.4.0 PyTurboJPEG==1.7.5 hass-nabucasa==0.94.0
    "$ha_new_venv/bin/python" -c "import homeassistant.components.mqtt.event, paho.mqtt.client, hass_frontend, sqlalchemy"
    touch "$ha_new_venv/.complete" "$ha_new_venv/.complete-running"
  else
    echo "no Python 3.13 at $python313 (set AMPEL_PYTHON313): the Home Assistant $ha_new_version test will be skipped" >&2
  fi
fi

# Selenium in a venv, for scripts/page-browser-check.py (the status page in headless Chromium,
# docs/http.md). It drives Debian's chromium through chromium-driver, so nothing downloads a
# browser. Cached like the Home Assistant venv; AMPEL_SELENIUM_VENV overrides the directory.
selenium_version=4.51.0
selenium_venv="${AMPEL_SELENIUM_VENV:-$HOME/.cache/ampel/selenium-venv-$selenium_version}"
if [ ! -f "$selenium_venv/.complete" ]; then
  echo "installing selenium==$selenium_version into $selenium_venv" >&2
  rm -rf "$selenium_venv"
  mkdir -p "$(dirname "$selenium_venv")"
  python3 -m venv "$selenium_venv"
  "$selenium_venv/bin/pip" install --quiet "selenium==$selenium_version"
  "$selenium_venv/bin/python" -c "import selenium.webdriver"
  touch "$selenium_venv/.complete"
fi
# axe-core (bundled in PyPI's axe-selenium-python) for the page's accessibility check.
if [ ! -f "$selenium_venv/.complete-axe" ]; then
  "$selenium_venv/bin/pip" install --quiet "axe-selenium-python==2.1.6"
  "$selenium_venv/bin/python" -c "import axe_selenium_python"
  touch "$selenium_venv/.complete-axe"
fi
