#!/usr/bin/env bash
# Compiles the shared core (Sources/AmpelCore), the lamp logic (Sources/AmpelLamp) and the
# C interface for the board glue (hardware/firmware/swift/LampABI.swift) with Embedded Swift
# for the two microcontroller families Ampel lamps run on:
#   riscv32-none-none-eabi  (ESP32-C6: rv32imac, ilp32)
#   armv7em-none-none-eabi  (Cortex-M4/M7)
# Output per target under hardware/build/<target>/: one object file per module and
# libampel_lamp.a (all three, what the ESP-IDF component links).
#
# It fails (non-zero) on any compiler error, warning-free or not, and when the objects need
# a symbol outside the small set a bare-metal C library provides: a stray `print` or
# Foundation-ish dependency is caught here, not on the board.
#
# Usage: hardware/build-embedded.sh            (SWIFTC=/path/to/swiftc to override)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/hardware/build"

swiftc="${SWIFTC:-}"
if [[ -z "$swiftc" ]]; then
    if [[ -x /opt/swift/usr/bin/swiftc ]]; then swiftc=/opt/swift/usr/bin/swiftc
    else swiftc="$(command -v swiftc || true)"; fi
fi
[[ -n "$swiftc" && -x "$swiftc" ]] || { echo "build-embedded: no swiftc found (set SWIFTC)" >&2; exit 1; }
bindir="$(dirname "$swiftc")"
ar="$bindir/llvm-ar"; [[ -x "$ar" ]] || ar="$(command -v llvm-ar || command -v ar)"
nm="$bindir/llvm-nm"; [[ -x "$nm" ]] || nm="$(command -v llvm-nm || command -v nm)"

# Symbols the objects may leave to the board's C library and compiler runtime (libgcc /
# compiler-rt helpers all start with two underscores). Embedded Swift's runtime needs an
# allocator and, for hashing seeds, arc4random_buf (the ESP32 glue provides it).
allowed='^(__[A-Za-z0-9_]+|free|posix_memalign|malloc|memcpy|memmove|memset|memcmp|arc4random_buf)$'

common=(-enable-experimental-feature Embedded -wmo -parse-as-library -Osize -swift-version 6 -package-name Ampel
        -warnings-as-errors -Xfrontend -disable-stack-protector -Xfrontend -function-sections)

build_target() {
    local target="$1"; shift
    local extra=("$@")
    local dir="$out/$target"
    rm -rf "$dir"
    mkdir -p "$dir"
    local flags=("${common[@]}" -target "$target" "${extra[@]}" -I "$dir")

    "$swiftc" "${flags[@]}" -module-name AmpelCore \
        -emit-module -emit-module-path "$dir/AmpelCore.swiftmodule" \
        -c -o "$dir/AmpelCore.o" "$root"/Sources/AmpelCore/*.swift
    "$swiftc" "${flags[@]}" -module-name AmpelLamp \
        -emit-module -emit-module-path "$dir/AmpelLamp.swiftmodule" \
        -c -o "$dir/AmpelLamp.o" "$root"/Sources/AmpelLamp/*.swift
    "$swiftc" "${flags[@]}" -module-name AmpelLampABI \
        -c -o "$dir/AmpelLampABI.o" "$root"/hardware/firmware/swift/*.swift

    "$ar" rcs "$dir/libampel_lamp.a" "$dir/AmpelCore.o" "$dir/AmpelLamp.o" "$dir/AmpelLampABI.o"

    # Symbols defined in one of our objects are not undefined for the library as a whole.
    local defined undefined unexpected
    defined="$("$nm" --defined-only -j "$dir"/*.o | sort -u)"
    undefined="$("$nm" -u -j "$dir"/*.o | sort -u)"
    unexpected="$(comm -23 <(echo "$undefined") <(echo "$defined") | grep -Ev "$allowed" | grep -v '^$' || true)"
    if [[ -n "$unexpected" ]]; then
        echo "build-embedded: $target objects need symbols a bare-metal board does not have:" >&2
        echo "$unexpected" >&2
        exit 1
    fi
    for symbol in ampel_lamp_configure ampel_lamp_message ampel_lamp_tick ampel_lamp_frame; do
        grep -qx "$symbol" <<<"$defined" || { echo "build-embedded: $symbol missing for $target" >&2; exit 1; }
    done

    for file in "$dir"/*.o "$dir/libampel_lamp.a"; do
        printf '%-28s %-70s %8d bytes\n' "$target" "${file#"$root"/}" "$(wc -c <"$file")"
    done
}

# ESP32-C6 is rv32imac; the ISA string matches ESP-IDF's own flags so the objects link with it.
build_target riscv32-none-none-eabi -Xcc -march=rv32imac_zicsr_zifencei -Xcc -mabi=ilp32
build_target armv7em-none-none-eabi
echo "build-embedded: ok"
