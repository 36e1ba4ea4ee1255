#!/usr/bin/env bash
# Creates the repo's Python environment (.venv) with what the tests and demo need.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
if [ ! -x "$root/.venv/bin/python" ]; then
  "$python" -m venv "$root/.venv"
fi
"$root/.venv/bin/python" -m pip install --quiet --upgrade pip
"$root/.venv/bin/python" -m pip install --quiet -r "$root/scripts/python-requirements.txt"
# tinygrad's CPU device needs a C compiler (clang).
"$root/scripts/setup-clang.sh"
