#!/usr/bin/env bash
# The pinned leg: each preview framework's tests on the version the spec pins, in a virtual
# environment of its own (.venv-pins/<framework>), with the torchlens package built into it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"

# tinygrad: the spec pins 0.13.0.
venv="$root/.venv-pins/tinygrad"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "tinygrad==0.13.0" "numpy>=2.0" "pytest>=8" "maturin==1.16.0"
"$root/scripts/setup-clang.sh"
"$venv/bin/python" -m pip install --quiet "$root"
(cd "$root/host-python/tests" && "$venv/bin/python" -m pytest -q -rs -m tinygrad test_tinygrad_*.py)

# Paddle: the spec pins 3.3.1 (CPU wheel); its tests import no other framework.
venv="$root/.venv-pins/paddle"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "paddlepaddle==3.3.1" "numpy>=2.0" "pytest>=8" "maturin==1.16.0"
"$venv/bin/python" -m pip install --quiet "$root"
(cd "$root/host-python/tests" && "$venv/bin/python" -m pytest -q -rs -m paddle test_paddle_*.py)

# MLX: the spec's 0.26 line, 0.26.5 (the first 0.26 release with a Linux CPU build, mlx-cpu).
venv="$root/.venv-pins/mlx"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "mlx[cpu]==0.26.5" "numpy>=2.0" "pytest>=8" "maturin==1.16.0"
"$venv/bin/python" -m pip install --quiet "$root"
(cd "$root/host-python/tests" && "$venv/bin/python" -m pytest -q -rs -m mlx test_mlx_*.py)

# TensorFlow: the spec pins 2.21 with Keras 3.15 (CPU wheel); its tests import no other framework.
venv="$root/.venv-pins/tf"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "tensorflow-cpu==2.21.0" "keras==3.15.1" "numpy>=2.0" "pytest>=8" "maturin==1.16.0"
"$venv/bin/python" -m pip install --quiet "$root"
(cd "$root/host-python/tests" && "$venv/bin/python" -m pytest -q -rs -m tf test_tf_*.py)
