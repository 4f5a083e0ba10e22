# Sourced by the benchmark scripts: the release binaries they measure.

# Sets `bin` to $BIN_DIR when given (binaries built elsewhere), else builds PRODUCTs (default
# AmpelBenchmarks and ampel) in release as deployed (--static-swift-stdlib), the log in
# OUT_DIR/build.log; with BUILD_LOCK set, each build holds that lock file (flock).
release_binaries() { # OUT_DIR [PRODUCT ...]
  if [ -n "${BIN_DIR:-}" ]; then
    bin=$BIN_DIR
    return
  fi
  local log=$1/build.log product
  shift
  [ $# -gt 0 ] || set -- AmpelBenchmarks ampel
  echo "building (release) ..." >&2
  : >"$log"
  for product in "$@"; do
    ${BUILD_LOCK:+flock "$BUILD_LOCK"} swift build -c release --static-swift-stdlib --product "$product" >>"$log" 2>&1 \
      || { cat "$log"; exit 1; }
  done
  bin=$(swift build -c release --static-swift-stdlib --show-bin-path)
}
