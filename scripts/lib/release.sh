# Sourced by the benchmark scripts: the release binaries they measure.

# Sets `bin` to $BIN_DIR when given (binaries built elsewhere), else builds the benchmarks and
# `ampel` in release as deployed (--static-swift-stdlib), the log in OUT_DIR/build.log.
release_binaries() { # OUT_DIR
  if [ -n "${BIN_DIR:-}" ]; then
    bin=$BIN_DIR
    return
  fi
  echo "building (release) ..." >&2
  swift build -c release --static-swift-stdlib --product AmpelBenchmarks >"$1/build.log" 2>&1 || { cat "$1/build.log"; exit 1; }
  swift build -c release --static-swift-stdlib --product ampel >>"$1/build.log" 2>&1 || { cat "$1/build.log"; exit 1; }
  bin=$(swift build -c release --static-swift-stdlib --show-bin-path)
}
