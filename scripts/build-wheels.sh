#!/usr/bin/env bash
# Builds both wheels into dist/ from one component build, so they carry identical core bytes:
# - torchlens-*-cp39-abi3-manylinux_*.whl: the pyo3 extension with the component embedded
#   (the fast host); `auditwheel show` must call it manylinux-compliant.
# - torchlens-*-py3-none-any.whl: the Python package plus the component file, run by the
#   `wasmtime` package from PyPI (any platform that package supports; no compiler to install).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
python="${PYTHON:-$root/.venv/bin/python}"
target="${CARGO_TARGET_DIR:-$root/target}"
./scripts/build-component.sh
component="$target/wasm32-wasip2/release/torchlens_core.wasm"
rm -f dist/torchlens-*.whl
# Through the project's PEP 517 backend (maturin, then the backends/ plugins added to the wheel),
# with the venv's maturin (on PATH: maturin's hooks call the `maturin` command).
# maturin's PEP 517 hooks default to no platform check (--compatibility off, a linux_x86_64
# tag); the platform wheel is manylinux_2_34, which maturin checks the binary against.
PATH="$(dirname "$python"):$PATH" TORCHLENS_COMPONENT="$component" \
  MATURIN_PEP517_ARGS="--compatibility manylinux_2_34" \
  "$python" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist .
"$python" scripts/build_pure_wheel.py --component "$component" --out dist
platform_wheel="$(ls dist/torchlens-*-abi3-*.whl)"
"$python" -m auditwheel show "$platform_wheel"
# `auditwheel show` exits 0 for a non-compliant wheel too; the tag must be a manylinux one it
# agrees with.
"$python" -m auditwheel show "$platform_wheel" | tr '\n' ' ' | grep -q 'is consistent with the following platform tag: "manylinux_'
ls -l dist/torchlens-*.whl
