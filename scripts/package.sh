#!/usr/bin/env bash
# Builds ampel_<version>_amd64.deb: the release binary as deployed (static Swift standard
# library, so the target needs no toolchain) with its bundled data, the systemd unit, the
# runnable example configuration as a conffile, the docs and licences. Installing it creates
# the system user `ampel` and /var/lib/ampel, and starts nothing: the admin enables the unit.
# Purging removes the user, /etc/ampel and /var/lib/ampel.
#
# Usage: scripts/package.sh [OUT_DIR]   (default: .build/package; BIN_DIR=<dir> to package a
# release build made elsewhere, e.g. by scripts/release-smoke.sh)
# Prints the path of the .deb on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/release.sh
source scripts/lib/release.sh
out=$(realpath -m "${1:-.build/package}")
mkdir -p "$out"
release_binaries "$out" ampel
version=$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/AmpelDomain/AmpelVersion.swift)
arch=$(dpkg --print-architecture)
root="$out/ampel_${version}_$arch"
rm -rf "$root"

# The binary finds its bundled data in the *.resources directories beside it (SwiftPM's
# Bundle.module, from the resolved path of the executable): both live in /usr/lib/ampel, and
# /usr/bin/ampel is a link to the binary.
install -d "$root/usr/lib/ampel" "$root/usr/bin"
install -m 0755 "$bin/ampel" "$root/usr/lib/ampel/ampel"
strip --strip-unneeded "$root/usr/lib/ampel/ampel"
for resources in "$bin"/*.resources; do
  cp -r "$resources" "$root/usr/lib/ampel/"
done
find "$root/usr/lib/ampel" -type d -exec chmod 0755 {} +
find "$root/usr/lib/ampel" -type f -name '*' ! -path "$root/usr/lib/ampel/ampel" -exec chmod 0644 {} +
ln -s ../lib/ampel/ampel "$root/usr/bin/ampel"

# The unit of deploy/systemd, with the package's paths.
install -d "$root/usr/lib/systemd/system"
sed -e 's#/usr/local/bin/ampel#/usr/bin/ampel#' -e 's#file:/usr/local/share/doc/ampel/deploy.md#file:/usr/share/doc/ampel/deploy.md#' \
  deploy/systemd/ampel.service >"$root/usr/lib/systemd/system/ampel.service"
chmod 0644 "$root/usr/lib/systemd/system/ampel.service"

# The example as it is runs against a local broker on bundled data (docs/deploy.md): a
# configuration the unit can start with; the admin edits it (a conffile: kept on upgrade).
install -d "$root/etc/ampel"
install -m 0640 deploy/ampel.example.yaml "$root/etc/ampel/ampel.yaml"

doc="$root/usr/share/doc/ampel"
install -d "$doc"
install -m 0644 README.md docs/deploy.md docs/configuration.md docs/topics.md docs/homeassistant.md docs/http.md "$doc/"
install -m 0644 Sources/AmpelData/Resources/indicators/ATTRIBUTION.md "$doc/ATTRIBUTION-indicators.md"
cat >"$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: ampel
Comment: The bundled data's sources and licences: /usr/share/doc/ampel/ATTRIBUTION-indicators.md
 and the README's data section.

Files: *
Copyright: 2020-2026 The Ampel authors
License: Ampel
 The project has chosen no public licence yet: the recipient of this package may install
 and run it; no other right is granted.

Files: usr/lib/ampel/*.resources/*
Copyright: Robert Koch-Institut (RKI); Bundesamt für Kartographie und Geodäsie (BKG)
License: CC-BY-4.0 and DL-DE-BY-2.0
 The RKI's incidence, hospitalisation and intensive-care data under CC BY 4.0
 (https://creativecommons.org/licenses/by/4.0/); district geometry © GeoBasis-DE / BKG,
 Datenlizenz Deutschland – Namensnennung – Version 2.0 (https://www.govdata.de/dl-de/by-2-0).
EOF
chmod 0644 "$doc/copyright"
# A changelog entry for this build (Debian's packages carry one).
printf 'ampel (%s) unstable; urgency=medium\n\n  * Release %s; see /usr/share/doc/ampel/deploy.md.\n\n -- Ampel maintainers <ampel-project@users.noreply.github.com>  %s\n' \
  "$version" "$version" "$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")" | gzip -9n >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
# Yams, the YAML reader, compiles libyaml's C sources into the binary (SwiftPM links statically).
install -d "$root/usr/share/lintian/overrides"
cat >"$root/usr/share/lintian/overrides/ampel" <<'OVERRIDES'
# Yams (the configuration's YAML reader) builds libyaml's sources into the binary: SwiftPM links
# its packages statically, so there is no shared libyaml to use instead.
ampel: embedded-library libyaml [usr/lib/ampel/ampel]
# The configuration may hold the broker password: readable by root and the ampel group only.
ampel: non-standard-file-perm 0640 != 0644 [etc/ampel/ampel.yaml]
OVERRIDES
chmod 0644 "$root/usr/share/lintian/overrides/ampel"

# The libraries the binary links, as packages (dpkg-shlibdeps needs a debian/control to read).
shlib=$(mktemp -d)
mkdir -p "$shlib/debian"
printf 'Source: ampel\n\nPackage: ampel\nArchitecture: any\n' >"$shlib/debian/control"
depends=$(cd "$shlib" && dpkg-shlibdeps -O "$root/usr/lib/ampel/ampel" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
rm -rf "$shlib"
[ -n "$depends" ] || { echo "package: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

install -d "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: ampel
Version: $version
Architecture: $arch
Maintainer: Ampel maintainers <ampel-project@users.noreply.github.com>
Installed-Size: $size
Depends: $depends, adduser
Recommends: mosquitto, curl
Section: net
Priority: optional
Homepage: https://github.com/ampel-project/ampel
Description: device positions to Corona traffic-light signals over MQTT
 Ampel takes device locations over MQTT (OwnTracks, fleet trackers, Home
 Assistant, Traccar), finds each position's German district, classifies it
 with the RKI's indicators under a rule set (Bavaria's traffic light of 2020,
 the hospital traffic light of 2021) and publishes the phase and its rules to
 lamps, displays, Home Assistant and phones, with a status page, API and
 metrics.
EOF
echo "/etc/ampel/ampel.yaml" >"$root/DEBIAN/conffiles"

cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# The system user and the state directory; nothing is enabled or started (docs/deploy.md).
set -e
if [ "$1" = configure ]; then
  if ! getent passwd ampel >/dev/null; then
    adduser --system --group --quiet --home /var/lib/ampel --no-create-home --shell /usr/sbin/nologin ampel
  fi
  install -d -m 0750 -o ampel -g ampel /var/lib/ampel
  chgrp ampel /etc/ampel/ampel.yaml
  chmod 0640 /etc/ampel/ampel.yaml
  if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
fi
exit 0
EOF
cat >"$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
# A running daemon stops before its binary goes (graceful: it publishes offline).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop ampel.service >/dev/null 2>&1 || true
fi
exit 0
EOF
cat >"$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# purge: the state, the configuration and the user go too.
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
if [ "$1" = purge ]; then
  rm -rf /var/lib/ampel /etc/ampel
  if getent passwd ampel >/dev/null; then deluser --system --quiet ampel >/dev/null 2>&1 || userdel ampel || true; fi
  if getent group ampel >/dev/null; then delgroup --system --quiet ampel >/dev/null 2>&1 || groupdel ampel || true; fi
fi
exit 0
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

deb="$out/ampel_${version}_$arch.deb"
dpkg-deb --root-owner-group --build -Zxz "$root" "$deb" >/dev/null
echo "$deb"
