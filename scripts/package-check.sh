#!/usr/bin/env bash
# The .deb as a field admin meets it: lintian finds no error; `dpkg -i` installs it on this
# machine and starts nothing; the `ampel` user runs the binary with no Swift toolchain on its
# PATH (`--version`, `ampel check`, the installed configuration checked); the unit passes
# `systemd-analyze verify`; `dpkg --purge` leaves nothing behind (no file, user or group).
#
# Usage: scripts/package-check.sh   (DEB=<file> to check a package built before; else it runs
# scripts/package.sh, with BIN_DIR passed on). Skips with a message, exit 0, where the machine
# does not allow it: not root, no lintian, or an `ampel` package installed already.
set -euo pipefail
cd "$(dirname "$0")/.."
skip() { echo "package check skipped: $*"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "installing a package needs root"
command -v lintian >/dev/null || skip "lintian is not installed (scripts/install-deps.sh installs it)"
if dpkg-query -W -f '${Status}' ampel 2>/dev/null | grep -q installed; then
  skip "an ampel package is installed on this machine already: not touching it"
fi
getent passwd ampel >/dev/null && skip "a user ampel exists already: not touching it"
fail() { echo "package check: $*" >&2; exit 1; }
deb=${DEB:-$(scripts/package.sh | tail -1)}
[ -f "$deb" ] || fail "no package at '$deb'"

# lintian: no errors (warnings are listed, not fatal).
lintian --no-tag-display-limit --fail-on error "$deb" || fail "lintian reports errors"

ampel_paths() { find /etc /usr /var/lib /lib -xdev \( -iname '*ampel*' \) 2>/dev/null | sort; }
before=$(mktemp)
ampel_paths >"$before"
cleanup() { rm -f "$before"; }
trap cleanup EXIT

dpkg -i "$deb" >/dev/null || fail "dpkg -i failed"
getent passwd ampel >/dev/null || fail "no system user ampel"
[ "$(stat -c '%U %a' /var/lib/ampel)" = "ampel 750" ] || fail "/var/lib/ampel: $(stat -c '%U %a' /var/lib/ampel)"
[ "$(stat -c '%G %a' /etc/ampel/ampel.yaml)" = "ampel 640" ] || fail "/etc/ampel/ampel.yaml: $(stat -c '%G %a' /etc/ampel/ampel.yaml)"
dpkg-query -W -f '${Conffiles}' ampel | grep -q /etc/ampel/ampel.yaml || fail "/etc/ampel/ampel.yaml is no conffile"
# Nothing started or enabled by the install.
if pgrep -x ampel >/dev/null; then fail "an ampel process runs after the install"; fi
if [ -d /run/systemd/system ] && systemctl is-enabled ampel.service >/dev/null 2>&1; then fail "the unit was enabled"; fi
# The binary needs no toolchain: no Swift library from outside the package, and it runs as the
# service user with only the system's directories on PATH.
if ldd /usr/lib/ampel/ampel | grep -qi swift; then fail "links a Swift library: $(ldd /usr/lib/ampel/ampel | grep -i swift)"; fi
as_ampel() { runuser -u ampel -- env -i PATH=/usr/bin:/bin HOME=/var/lib/ampel "$@"; }
as_ampel sh -c 'command -v swift' >/dev/null && fail "swift on the service user's PATH"
version=$(as_ampel /usr/bin/ampel --version) || fail "ampel --version failed"
echo "package check: $version"
check=$(cd /var/lib/ampel && as_ampel /usr/bin/ampel check --district 09162 --date 2020-10-15 --source snapshot) \
  || fail "ampel check failed: $check"
echo "$check" | grep -q "München" || fail "ampel check: $check"
as_ampel /usr/bin/ampel run --config /etc/ampel/ampel.yaml --check-config >/dev/null || fail "the installed configuration does not pass --check-config"
systemd-analyze verify /usr/lib/systemd/system/ampel.service || fail "systemd-analyze verify"

dpkg --purge ampel >/dev/null || fail "dpkg --purge failed"
after=$(ampel_paths)
[ "$after" = "$(cat "$before")" ] || fail "left behind: $(comm -13 "$before" <(echo "$after"))"
getent passwd ampel >/dev/null && fail "the user ampel is left"
getent group ampel >/dev/null && fail "the group ampel is left"
echo "package check: $(basename "$deb") passed (lintian, install, run as ampel, unit, purge)"
