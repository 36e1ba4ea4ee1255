#!/usr/bin/env bash
# The reference implementation (torchlens 2.36.1) for the benchmarks' side-by-side figures, in
# its own environment (.venv-reference) that sees the frameworks of the repo's .venv through a
# .pth file: both sides then run the very same torch, JAX, TensorFlow, MLX, Paddle and tinygrad,
# and nothing is downloaded twice. The reference's own torchlens sits in its own site-packages,
# which comes before the .pth entry on sys.path, so it never imports ours.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv-reference"
if [ ! -x "$venv/bin/python" ]; then
  "$root/.venv/bin/python" -m venv "$venv"
fi
frameworks="$("$root/.venv/bin/python" -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"]); print(p["platlib"])' | sort -u)"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
printf '%s\n' "$frameworks" > "$site/zz-torchlens-frameworks.pth"
"$venv/bin/python" -m pip install --quiet "torchlens==2.36.1"
"$venv/bin/python" -c 'import torchlens, torch; assert torchlens.__version__ == "2.36.1", torchlens.__file__'
