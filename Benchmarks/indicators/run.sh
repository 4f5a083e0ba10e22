#!/usr/bin/env bash
# Ingest of the RKI's hospitalisation and intensive-care files (a rule set of state
# indicators on the live source `rki`), whole process, one command:
#
#   Benchmarks/indicators/run.sh          # RUNS=9
#
# Release build (--static-swift-stdlib, as deployed; or the binaries in BIN_DIR). The files are
# the real ones in ../shared/data/rki-github (1.8 MB and 3.7 MB), read through file:// URLs so
# that no server stands in the measurement. A and B alternate, RUNS each:
#   A  ampel states --rules krankenhausampel-2021 --source rki --hospitalisation-url file://...
#      --icu-url file://... --json: both files read and every row checked, the publication and
#      its 28-day window built, the 17 state reports written
#   B  pandas.read_csv of both files, each state's newest values (Benchmarks/indicators/pandas_states.py)
# Prints median wall time, peak RSS and the ratio of the medians to benchmarks-out/indicators/results.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/release.sh
source scripts/lib/release.sh

RUNS=${RUNS:-9}
out=benchmarks-out/indicators
mkdir -p "$out"
BUILD_LOCK=${BUILD_LOCK:-/tmp/ampel-build.lock} release_binaries "$out" ampel
ampel=$bin/ampel
data=${AMPEL_SHARED_DATA:-$(cd .. && pwd)/shared/data}/rki-github
hospital=$data/hospitalisierungen/Aktuell_Deutschland_adjustierte-COVID-19-Hospitalisierungen.csv
icu=$data/intensivregister/Intensivregister_Bundeslaender_Kapazitaeten.csv

venv=.venv-bench
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import pandas' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet pandas
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampel-indicators.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/ampel.times"; : >"$tmp/pandas.times"
one_ampel() {
  /usr/bin/time -f '%e %M' -a -o "$tmp/ampel.times" "$ampel" states --rules krankenhausampel-2021 --source rki \
    --hospitalisation-url "file://$hospital" --icu-url "file://$icu" --state-dir "$tmp/state" --json >"$tmp/ampel.json"
}
one_pandas() {
  /usr/bin/time -f '%e %M' -a -o "$tmp/pandas.times" "$venv/bin/python" Benchmarks/indicators/pandas_states.py "$hospital" "$icu" >"$tmp/pandas.txt"
}
# One of each first, uncounted: the files and both programs in the page cache.
one_ampel; one_pandas; : >"$tmp/ampel.times"; : >"$tmp/pandas.times"
for _ in $(seq "$RUNS"); do one_ampel; one_pandas; done
results=$out/results.txt
{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
  echo "files: $(stat -c %s "$hospital") + $(stat -c %s "$icu") bytes"
  python3 - "$tmp/ampel.times" "$tmp/pandas.times" <<'PY'
import statistics, sys
def read(path):
    rows = [line.split() for line in open(path) if line.strip() and line[0].isdigit()]
    return [float(r[0]) for r in rows], [int(r[1]) / 1024 for r in rows]
(at, am), (pt, pm) = read(sys.argv[1]), read(sys.argv[2])
a, p = statistics.median(at), statistics.median(pt)
print(f"| whole process, {len(at)} runs each, alternating | median s | peak RSS MB | runs s |")
print("|---|---|---|---|")
print(f"| ampel states (rki, file://) | {a:.3f} | {statistics.median(am):.1f} | {' '.join(f'{t:.2f}' for t in at)} |")
print(f"| pandas.read_csv, newest values per state | {p:.3f} | {statistics.median(pm):.1f} | {' '.join(f'{t:.2f}' for t in pt)} |")
print(f"ratio pandas/ampel (median wall): {p / a:.2f}")
PY
} | tee "$results"
