#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer) of the daemon's intake (issue 14): JSONScanner, the
# OwnTracks, plain and Traccar parsers, the device-key rules and Traccar's time parser.
#
#   Benchmarks/fuzz/libfuzzer.sh -max_total_time=600       # ten minutes
#   Benchmarks/fuzz/libfuzzer.sh -max_total_time=30        # what CI runs
#   Benchmarks/fuzz/libfuzzer.sh path/to/crash-<sha1>      # replay one input
#   FUZZ_OUTCOMES=1 Benchmarks/fuzz/libfuzzer.sh -runs=0     # the corpus once: outcomes per input
#
# Builds one executable with swiftc -sanitize=fuzzer,address from the shipped sources (no
# copies): AmpelCore (the scanner) and the two files of AmpelDomain the intake needs (Language,
# Day) as modules of their own, then Sources/AmpelDaemon/Intake/{InputParser,DeviceKey,
# InternetTime}.swift with Benchmarks/fuzz/libfuzzer/FuzzIntake.swift (the entry point and the
# properties it checks) as one module. Intake.swift is left out: it routes topics and needs the
# MQTT client and the configuration.
#
# The seed corpus: the OwnTracks samples of owntracks/json-schema (AMPEL_OWNTRACKS_SAMPLES,
# default ../shared/data/owntracks/json-schema-tests) for each of the three inputs, and the
# payloads, keys and times written below. The working corpus and crash artifacts stay in
# benchmarks-out/fuzz/libfuzzer/ (CORPUS_DIR to choose another). Every argument goes to libFuzzer.
# Exit status: libFuzzer's (non-zero when an input crashed or broke a checked promise).
#
# The build takes the machine's build lock (/tmp/ampel-build.lock, BUILD_LOCK); the fuzzing runs
# under `nice -n 10` (NICE to change).
set -euo pipefail
export LC_ALL=C  # byte lengths in the seeds below
cd "$(dirname "$0")/../.."
root=$(pwd)
export ROOT=$root
out=$root/benchmarks-out/fuzz/libfuzzer
build=$out/build
corpus=${CORPUS_DIR:-$out/corpus}
seeds=$out/seeds
mkdir -p "$build" "$corpus" "$seeds" "$out/artifacts"

flags=(-O -g -sanitize=fuzzer,address -parse-as-library -swift-version 6)
echo "building the fuzz target (swiftc ${flags[*]}) ..." >&2
(
  cd "$build"
  flock "${BUILD_LOCK:-/tmp/ampel-build.lock}" sh -c '
    set -e
    swiftc "$@" -module-name AmpelCore -emit-module -emit-library -static -o libAmpelCore.a "$ROOT"/Sources/AmpelCore/*.swift
    swiftc "$@" -module-name AmpelDomain -emit-module -emit-library -static -o libAmpelDomain.a -I . \
      "$ROOT"/Sources/AmpelDomain/Language.swift "$ROOT"/Sources/AmpelDomain/Day.swift
    swiftc "$@" -module-name FuzzIntake -I . -L . -lAmpelCore -lAmpelDomain -o fuzz-intake \
      "$ROOT"/Sources/AmpelDaemon/Intake/InputParser.swift "$ROOT"/Sources/AmpelDaemon/Intake/DeviceKey.swift \
      "$ROOT"/Sources/AmpelDaemon/Intake/InternetTime.swift "$ROOT"/Benchmarks/fuzz/libfuzzer/FuzzIntake.swift
  ' sh "${flags[@]}"
) >"$out/build.log" 2>&1 || { cat "$out/build.log" >&2; exit 1; }

# Replaying inputs: only files as arguments.
if [ $# -gt 0 ] && [ -f "$1" ]; then
  SWIFT_BACKTRACE=enable=no exec "$build/fuzz-intake" "$@"
fi

# Seeds: mode byte (0 OwnTracks, 1 plain, 2 Traccar, 3 key, 4 time, 5 scanner), then for the
# inputs a key length byte, the key and the payload.
seed() { # NAME MODE KEY PAYLOAD
  local file=$seeds/$1
  printf "\\x$(printf %02x "$2")" >"$file"
  if [ "$2" -le 2 ]; then
    printf "\\x$(printf %02x "${#3}")" >>"$file"
    printf '%s' "$3" >>"$file"
  fi
  printf '%s' "$4" >>"$file"
}
rm -f "$seeds"/*
samples=${AMPEL_OWNTRACKS_SAMPLES:-$root/../shared/data/owntracks/json-schema-tests}
if [ -d "$samples" ]; then
  for f in "$samples"/*.json; do
    name=$(basename "$f" .json)
    for mode in 0 1 2 5; do seed "ot-$name-$mode" "$mode" "alice/phone" "$(cat "$f")"; done
  done
else
  echo "note: no OwnTracks samples at $samples; the built-in seeds only" >&2
fi
seed ot-location 0 "alice/phone" '{"_type":"location","lat":48.1374,"lon":11.5755,"tst":1604570400,"acc":12,"batt":80}'
seed ot-null-tst 0 "bob/car" '{"_type":"location","lat":48.1374,"lon":11.5755,"tst":null}'
seed ot-lwt 0 "u/d" '{"_type":"lwt","tst":1604570400}'
seed ot-array 0 "u/d" '[{"_type":"location","lat":8,"lon":9,"tst":1000}]'
seed plain-short 1 "car-7" '{"lat":48.1374,"lon":11.5755}'
seed plain-long 1 "car-7" '{"latitude":48.1374,"longitude":11.5755,"tst":1604570400,"lang":"de"}'
seed plain-lang 1 "car-7" '{"lat":48.1,"lon":11.5,"lang":"de_DE.UTF-8","tst":1604570400.5}'
seed plain-esc 1 $'j\xc3\xb6rg' '{"\u006cat":4.81374e1,"lon":-0.0,"tst":1e9,"lang":"en-GB"}'
seed traccar-iso 2 "" '{"position":{"latitude":48.1374,"longitude":11.5755,"fixTime":"2020-11-05T10:00:00.000+0000"},"device":{"uniqueId":"865432","name":"Van 7"}}'
seed traccar-ms 2 "" '{"position":{"latitude":48.1374,"longitude":11.5755,"fixTime":1604570400000},"device":{"uniqueId":"a b\u202ec"}}'
seed traccar-null 2 "" '{"device":{"uniqueId":"x"},"position":{"fixTime":null,"latitude":0,"longitude":180}}'
seed key-plain 3 "" 'alice/phone'
seed key-bidi 3 "" $'alice\xe2\x80\xaeenohp'
seed key-zw 3 "" $'alice\xe2\x80\x8b/\xef\xbb\xbfphone'
seed key-cjk 3 "" $'\xe6\x9d\xb1\xe4\xba\xac/phone'
seed time-z 4 "" '2020-11-05T10:00:00Z'
seed time-offset 4 "" '2020-11-05T10:00:00.250-01:30'
seed time-jackson 4 "" '2020-11-05T10:00:00.000+0000'
seed scan-nested 5 "" '{"a":[1,{"b":[true,false,null]}],"c":"\ud83d\ude00","d":-0.5e-3}'

dict=$out/json.dict
cat >"$dict" <<'DICT'
"{"
"}"
"["
"]"
":"
","
"\""
"\\u"
"\\ud800"
"\\udc00"
"null"
"true"
"false"
"1e400"
"-0"
"1e-400"
"\"_type\""
"\"location\""
"\"lat\""
"\"lon\""
"\"latitude\""
"\"longitude\""
"\"tst\""
"\"lang\""
"\"position\""
"\"device\""
"\"uniqueId\""
"\"fixTime\""
"\"de\""
"\"en-GB\""
"\xe2\x80\xae"
"\xe2\x80\x8b"
"\xef\xbb\xbf"
"T10:00:00"
"+01:00"
"Z"
DICT

# The Swift runtime's backtracer would inspect the process after an abort under ASan and report
# its own reads as a second crash.
export SWIFT_BACKTRACE=enable=no
echo "fuzzing (corpus $corpus, artifacts $out/artifacts) ..." >&2
set +e
nice -n "${NICE:-10}" "$build/fuzz-intake" -dict="$dict" -max_len=4096 -print_final_stats=1 -artifact_prefix="$out/artifacts/" \
  "$@" "$corpus" "$seeds" 2>&1 | tee "$out/fuzz.log" | grep -E --line-buffered '(DONE|pulse|BROKEN|ERROR|SUMMARY|stat::|Test unit written|INFO: Seed)'
status=${PIPESTATUS[0]}
set -e
echo "libFuzzer exit status: $status (full log: $out/fuzz.log)" >&2
exit "$status"
