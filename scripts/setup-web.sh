#!/usr/bin/env bash
# Installs what the browser viewer's build and tests need, if missing: Debian's chromium, the
# wasm32-unknown-unknown target, wasm-bindgen-cli matching the wasm-bindgen crate, and the
# viewer's npm packages (playwright-core only; it drives the system chromium, so
# `npx playwright install` is never needed).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
  "${apt_get[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -qq chromium
fi

rustup target list --installed | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown

# The CLI must match the crate exactly (the version pinned in host-web/Cargo.toml).
want="$(sed -n 's/^wasm-bindgen = { version = "=\([0-9.]*\)".*/\1/p' host-web/Cargo.toml)"
have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
if [ "$have" != "$want" ]; then
  cargo install wasm-bindgen-cli --version "$want"
fi

(cd host-web && npm ci --no-audit --no-fund --loglevel=error)
