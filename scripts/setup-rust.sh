#!/usr/bin/env bash
# Adds the rustup targets and components the build needs, if missing.
set -euo pipefail
installed="$(rustup target list --installed)"
for target in wasm32-wasip2 wasm32-unknown-unknown; do
  grep -qx "$target" <<<"$installed" || rustup target add "$target"
done
for component in rustfmt clippy; do
  rustup component list --installed | grep -q "^$component" || rustup component add "$component"
done
