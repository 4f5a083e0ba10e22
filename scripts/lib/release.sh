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

# evict_from_page_cache FILE: drops FILE's pages from the page cache (written back first), so the
# next start reads it from disk as a deployed binary is: a just-linked binary in the cache maps
# more of itself per fault, 3-5 MB of RSS at start (docs/DESIGN.md, decision 67).
evict_from_page_cache() {
  python3 -c "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)" "$1"
}
