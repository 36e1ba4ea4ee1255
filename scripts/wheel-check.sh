#!/usr/bin/env bash
# Installs each wheel `make wheel` wrote into dist/ into a fresh virtual environment the way a
# user does, from dist/ alone (`--no-index`: the package index's `torchlens` is another
# project), and traces a torch model, then a JAX function: the built-in backends are plugins
# the build carried into the wheel (backends/<name>/ -> torchlens/backends/<name>/).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for wheel in "$root"/dist/torchlens-*.whl; do
  echo "== $(basename "$wheel")"
  python3 -m venv "$work/venv"
  "$work/venv/bin/python" -m pip install --quiet --upgrade pip
  # The frameworks and the package's own dependencies come from the index (pip's cache makes
  # this quick after setup-python.sh); torchlens itself only from dist/.
  "$work/venv/bin/python" -m pip install --quiet "numpy>=2.0" "wasmtime>=50,<51" "torch==2.15.0" \
    "jax[cpu]==0.10.2"
  "$work/venv/bin/python" -m pip install --quiet --no-index --find-links "$root/dist" "$wheel"
  (cd "$work" && "$work/venv/bin/python" - <<'PY'
import torch
import torchlens as tl

model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
trace = tl.trace(model, torch.ones(1, 3))
assert trace.labels == ["input_1", "linear_1_2", "relu_1_3", "linear_2_4", "output_1"], trace.labels
assert trace.validate_forward_pass() is True
assert sorted(tl.backends.names()) == ["jax", "mlx", "paddle", "tf", "tinygrad", "torch"], tl.backends.names()
# The scorecard record shipped beside the backend in the wheel (scorecards/torch.json).
assert tl.backends.torch.capability_summary["save_selected"] == "supported"

import jax.numpy as jnp

def fn(params, x):
    return jnp.tanh(x @ params["w"] + params["b"])

params = {"w": jnp.ones((3, 2)), "b": jnp.zeros((2,))}
jax_trace = tl.trace(fn, (params, jnp.ones((4, 3))), backend="jax")
assert jax_trace.validate_forward_pass([]) is True
print("traces torch and JAX on host", tl.versions()["host"], "from", tl.__file__)
PY
  )
  rm -rf "$work/venv"
done
