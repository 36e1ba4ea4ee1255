#!/usr/bin/env bash
# Builds the sdist the way a packager does (python -m build --sdist), installs it into a fresh
# virtual environment (compiling the core component, wasmtime and the extension from the
# tarball alone) and traces a torch model with it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$root/.venv/bin/python" -m pip install --quiet build
"$root/.venv/bin/python" -m build --sdist --outdir "$work/dist" "$root"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
# torch comes from the package index (pip's cache makes this quick after setup-python.sh).
"$work/venv/bin/python" -m pip install --quiet "torch==2.15.0" "$work"/dist/torchlens-*.tar.gz
cd "$work"
"$work/venv/bin/python" - <<'PY'
import torch
import torchlens as tl

model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
trace = tl.trace(model, torch.ones(1, 3))
assert trace.labels == ["input_1", "linear_1_2", "relu_1_3", "linear_2_4", "output_1"], trace.labels
assert trace.validate_forward_pass() is True
assert sorted(tl.backends.names()) == ["jax", "mlx", "paddle", "tf", "tinygrad", "torch"], tl.backends.names()
print("sdist install traces a torch model:", trace)
PY
