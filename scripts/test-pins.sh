#!/usr/bin/env bash
# The pinned leg: each preview framework's tests on the version the spec pins, and on each
# backend's declared supported minimum, in a virtual environment of its own
# (.venv-pins/<framework>), with the torchlens package installed into it.
# The package is built once (an abi3 wheel) and installed into every leg.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
wheels="$root/target/pins-wheel"

# leg NAME[:TAG] MARKER REQUIREMENT...: a venv (.venv-pins/NAME, or NAME-TAG when one backend
# has two legs) with the pinned framework, the wheel, and its tests, then backend NAME's
# conformance --check. numpy>=2.0 unless a REQUIREMENT names numpy itself.
leg() {
  local name="${1%%:*}" venv_name="${1/:/-}" marker="$2"
  shift 2
  local venv="$root/.venv-pins/$venv_name" numpy="numpy>=2.0" requirement
  for requirement in "$@"; do
    case "$requirement" in numpy*) numpy="" ;; esac
  done
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet "$@" ${numpy:+"$numpy"} "pytest>=8" "maturin==1.16.0"
  if ! ls "$wheels"/torchlens-*.whl >/dev/null 2>&1; then
    "$venv/bin/python" -m pip wheel --quiet --no-deps -w "$wheels" "$root"
  fi
  # --no-deps: the requirements above already hold its one dependency, numpy (a reinstall with
  # dependencies would replace a leg's numpy<2 by the newest numpy).
  "$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheels"/torchlens-*.whl
  (cd "$root/host-python/tests" && "$venv/bin/python" -m pytest -q -rs -m "$marker" "test_${marker}_"*.py)
  # The conformance suite on the pin: --check against the pinned record (PINS_WRITE=1 writes
  # it into scorecards/ and the package's copy instead).
  (cd "$root" && "$venv/bin/python" -m tests.conformance.scorecard --backend "$name" \
    "$([ "${PINS_WRITE:-0}" = 1 ] && echo --write || echo --check)")
}

rm -rf "$wheels"
# tinygrad: the spec pins 0.13.0 (its CPU device compiles with clang).
"$root/scripts/setup-clang.sh"
leg tinygrad tinygrad "tinygrad==0.13.0"
# Paddle: the spec pins 3.3.1 (CPU wheel); its tests import no other framework.
leg paddle paddle "paddlepaddle==3.3.1"
# MLX: the spec's 0.26 line, 0.26.5 (the first 0.26 release with a Linux CPU build, mlx-cpu).
leg mlx mlx "mlx[cpu]==0.26.5"
# TensorFlow: the spec pins 2.21 with Keras 3.15 (CPU wheel); its tests import no other framework.
leg tf tf "tensorflow-cpu==2.21.0" "keras==3.15.1"
# TensorFlow's declared minimum, 2.16 (2.16.1, CPU wheel; its scorecard record is 2.16.1),
# built against NumPy 1 (tensorflow 2.16 requires numpy<2).
leg tf:min tf "tensorflow-cpu==2.16.1" "keras==3.15.1" "numpy<2"
# JAX's declared minimum, 0.7.1 (the oldest JAX that installs with the extra's equinox>=0.13
# and flax>=0.12), with the oldest of those: equinox 0.13.0, flax 0.12.0. safetensors: the
# .tlspec test reads the file with it.
leg jax jax "jax[cpu]==0.7.1" "jaxlib==0.7.1" "equinox==0.13.0" "flax==0.12.0" "safetensors"
# Torch's declared minimum, 2.10 (2.10.0, PyPI wheel, run on CPU; its scorecard record is
# 2.10.0), with its torchvision, 0.25.0 (the input-shape tests build resnet18). Older releases
# fail the torch tests: docs/backends/torch.md says what breaks.
leg torch:min torch "torch==2.10.0" "torchvision==0.25.0"
