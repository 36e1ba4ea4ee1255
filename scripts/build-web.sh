#!/usr/bin/env bash
# Builds the browser viewer: torchlens-web for wasm32-unknown-unknown (release), then
# wasm-bindgen's JavaScript glue into host-web/www/pkg/. The page is then host-web/www/.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --lib -p torchlens-web --target wasm32-unknown-unknown
wasm-bindgen --target web --no-typescript --out-dir host-web/www/pkg \
  "$target_dir/wasm32-unknown-unknown/release/torchlens_web.wasm"
echo "viewer built: host-web/www/ (open it through any static server, or tlspec view FILE)"
