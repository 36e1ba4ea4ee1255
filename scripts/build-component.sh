#!/usr/bin/env bash
# Builds the core as a WASI Preview 2 component (target/wasm32-wasip2/release/torchlens_core.wasm),
# adding the rustup target first if this machine lacks it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
cargo build --quiet --locked -p torchlens-core --lib --target wasm32-wasip2 --release
target="${CARGO_TARGET_DIR:-$root/target}"
echo "component: $target/wasm32-wasip2/release/torchlens_core.wasm ($(stat -c %s "$target/wasm32-wasip2/release/torchlens_core.wasm") bytes)"
