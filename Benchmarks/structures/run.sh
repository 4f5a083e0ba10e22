#!/usr/bin/env bash
# The daemon's hand-written structures against library ones (issue 20), one command:
#
#   flock /tmp/ampel-build.lock Benchmarks/structures/run.sh      # RUNS=3 by default
#
# Release build with --static-swift-stdlib, as the daemon ships. In one run:
#  1. CompactMap vs OrderedDictionary<String, 32-byte entry> at 100,000 and 1,000,000 entries:
#     build time, lookups/s (hits, misses), heap bytes (malloc), one copy-on-write copy (time and
#     bytes), medians of RUNS rounds alternating which goes first; then VmRSS growth while building
#     one map, a fresh process per map and run;
#  2. InternetTime vs Date.ISO8601FormatStyle (FoundationEssentials) vs ISO8601DateFormatter
#     (Foundation): format and parse per second; VmRSS of a fresh process after using each once,
#     each linking only what it needs (ProbeBare: no Foundation, ProbeEssentials: FoundationEssentials,
#     ProbeFoundation: Foundation as the daemon links it); which inputs each parser accepts.
# Prints Markdown; raw lines in benchmarks-out/structures/.
set -euo pipefail
cd "$(dirname "$0")"
RUNS=${RUNS:-3}
out=../../benchmarks-out/structures
mkdir -p "$out"

echo "building (release) ..." >&2
swift build -c release --static-swift-stdlib >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
bin=$(swift build -c release --static-swift-stdlib --show-bin-path)

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

echo "## Maps (RUNS=$RUNS, medians)"
echo
"$bin/StructuresBenchmark" maps "$RUNS" | tee "$out/maps.md"
echo
echo "| entries | VmRSS growth while building, fresh process | CompactMap | OrderedDictionary | OrderedDictionary / CompactMap |"
echo "|---|---|---|---|---|"
for count in 100000 1000000; do
  : >"$out/map-rss-$count.txt"
  for run in $(seq "$RUNS"); do
    if [ $((run % 2)) = 1 ]; then order="compact ordered"; else order="ordered compact"; fi
    for variant in $order; do "$bin/StructuresBenchmark" map-rss "$variant" "$count" >>"$out/map-rss-$count.txt"; done
  done
  ours=$(grep '^compact' "$out/map-rss-$count.txt" | field delta | median)
  theirs=$(grep '^ordered' "$out/map-rss-$count.txt" | field delta | median)
  echo "| $count | kB | $ours | $theirs | $(awk "BEGIN { printf \"%.2f\", $theirs / $ours }") |"
done

echo
echo "## Time formats (RUNS=$RUNS, medians)"
echo
"$bin/StructuresBenchmark" times "$RUNS" | tee "$out/times.md"
echo
echo "| process (fresh, after using it once) | VmRSS kB | RssAnon kB | RssFile kB |"
echo "|---|---|---|---|"
: >"$out/probes.txt"
probes="ProbeBare:baseline ProbeBare:internettime ProbeEssentials:baseline ProbeEssentials:formatstyle
  ProbeFoundation:baseline ProbeFoundation:internettime ProbeFoundation:formatstyle ProbeFoundation:formatter"
for run in $(seq "$RUNS"); do
  for probe in $probes; do echo "${probe%%:*} $("$bin/${probe%%:*}" "${probe#*:}")" >>"$out/probes.txt"; done
done
for probe in $probes; do
  lines=$(grep "^${probe%%:*} ${probe#*:} " "$out/probes.txt")
  echo "| ${probe%%:*} ${probe#*:} | $(field VmRSS <<<"$lines" | median) | $(field RssAnon <<<"$lines" | median) | $(field RssFile <<<"$lines" | median) |"
done

echo
echo "## Inputs InternetTime accepts (and refuses)"
echo
"$bin/StructuresBenchmark" accepts | tee "$out/accepts.md"
