#!/usr/bin/env bash
# Geo lookup benchmark, one command: bash Benchmarks/geo/run.sh
#
# Release build, one core (taskset): (a) the grid index, (b) the naive scan of all polygons,
# (c) shapely 2 STRtree.query(points, predicate="within") on the same geometry and points;
# index load time and memory; `ampel resolve` on 1M lines. Output also in benchmarks-out/geo/.
# Env: AMPEL_GEO_DATA (default ../shared/data/geo), CPU (core to pin, default 0).
set -euo pipefail
# Times are CPU time of the measuring thread/process: the machine may be shared, and wall time
# would measure the neighbours too (resolve also prints its wall time).
cd "$(dirname "$0")/../.."
DATA=${AMPEL_GEO_DATA:-../shared/data/geo}
OUT=benchmarks-out/geo
CPU=${CPU:-0}
mkdir -p "$OUT"

if [ ! -x .venv-bench/bin/python ] || ! .venv-bench/bin/python -c 'import shapely, numpy' 2>/dev/null; then
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install --quiet 'shapely>=2,<3' numpy
fi

swift build -c release --static-swift-stdlib --product AmpelBenchmarks >&2
swift build -c release --static-swift-stdlib --product ampel >&2
BIN=$(swift build -c release --static-swift-stdlib --show-bin-path)

PIN=()
if command -v taskset >/dev/null; then PIN=(taskset -c "$CPU"); fi

{
  echo "== machine"
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores visible, pinned to core $CPU"
  echo "swift: $(swift --version 2>&1 | head -1)"
  echo "== swift (release): AmpelBenchmarks geo"
  "${PIN[@]}" "$BIN/AmpelBenchmarks" geo --out "$OUT" --vg1000 "$DATA/bkg_vg1000_krs_2024-12-31_wgs84.geojson"
  echo "== python: shapely STRtree"
  "${PIN[@]}" .venv-bench/bin/python Benchmarks/geo/shapely_bench.py "$DATA" "$OUT/points-germany.f64" "$OUT/points-bavaria.f64"
  echo "== ampel resolve, $(wc -l < "$OUT/resolve-input.txt") lines ($(du -h "$OUT/resolve-input.txt" | cut -f1)), best of 3"
  best=""; best_cpu=""
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %U %S" -o "$OUT/resolve-time.txt" \
      "${PIN[@]}" "$BIN/ampel" resolve < "$OUT/resolve-input.txt" > "$OUT/resolve-output.txt"
    read -r wall user sys < "$OUT/resolve-time.txt"
    cpu=$(echo "$user + $sys" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$wall < $best" | bc -l)" = 1 ]; then best=$wall; fi
    if [ -z "$best_cpu" ] || [ "$(echo "$cpu < $best_cpu" | bc -l)" = 1 ]; then best_cpu=$cpu; fi
  done
  lines=$(wc -l < "$OUT/resolve-output.txt")
  printf "resolve: %d output lines; best wall %.2f s, best CPU (user+sys) %.2f s = %.2fM lines/s of CPU (incl. process start and index load)\n" \
    "$lines" "$best" "$best_cpu" "$(echo "$lines / $best_cpu / 1000000" | bc -l)"
} | tee "$OUT/results.txt"
