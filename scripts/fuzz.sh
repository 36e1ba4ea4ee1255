#!/usr/bin/env bash
# Fuzzes the core's untrusted-input parsers with cargo fuzz (libFuzzer, AddressSanitizer).
#   scripts/fuzz.sh [SECONDS] [TARGET]   (defaults: 60 s, every target in turn; `make fuzz`)
# Installs cargo-fuzz if missing; needs the nightly toolchain (rustup's `nightly`), which
# this kind of machine ships. New inputs go to target/fuzz-corpus/<target>, starting from
# the committed seeds in fuzz/seeds/<target>; crashes land in fuzz/artifacts/<target>.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
targets="${2:-decode_tlspec manifest_text selector_expression}"
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz: the nightly toolchain is missing (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz@0.13.1
fi
cd "$root/fuzz"
# With the committed fuzz/Cargo.lock: cargo fuzz has no --locked, so resolve once with it first
# (a stale lock fails here instead of being rewritten).
cargo +nightly metadata --locked --format-version 1 >/dev/null
# The fuzz build has its own target directory: its instrumented artifacts never mix with the
# main workspace's.
export CARGO_TARGET_DIR="$root/target/fuzz-build"
for target in $targets; do
  corpus="$root/target/fuzz-corpus/$target"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${seconds}s"
  cargo +nightly fuzz run "$target" "$corpus" "$root/fuzz/seeds/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
done
