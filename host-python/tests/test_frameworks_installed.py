"""Every framework the repository's environment installs for the backends imports.

Sixteen test files skip themselves at import when their framework is missing
(``pytest.importorskip``), so a framework that failed to install would silently drop its whole
suite from ``make test``. ``make test`` sets ``TORCHLENS_REQUIRE_FRAMEWORKS=1``, and then this
test fails, naming each framework that does not import. Without the variable (a checkout with
only some frameworks installed) it skips with that reason.

The imports run in a child process, so importing every framework at once changes nothing in the
pytest worker (some tests check which frameworks a call imports), and in the order the package's
conftest keeps: Paddle before TensorFlow, as Paddle crashes when imported after it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

REQUIREMENTS = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "python-requirements.txt")

# (distribution in scripts/python-requirements.txt, module to import), Paddle before TensorFlow.
FRAMEWORKS = [
    ("torch", "torch"),
    ("torchvision", "torchvision"),
    ("jax", "jax"),
    ("equinox", "equinox"),
    ("flax", "flax.nnx"),
    ("tinygrad", "tinygrad"),
    ("paddlepaddle", "paddle"),
    ("mlx", "mlx.core"),
    ("tensorflow-cpu", "tensorflow"),
    ("keras", "keras"),
]
DISTRIBUTION_OF = {module: name for name, module in FRAMEWORKS}

_CHILD = """
import importlib, json, sys
missing = []
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
    except Exception as error:  # ImportError, or a framework that breaks while importing
        missing.append([module, f"{type(error).__name__}: {error}"[:300]])
print(json.dumps(missing))
"""


def _required_distributions() -> set:
    """The distribution names scripts/python-requirements.txt installs (extras and pins dropped)."""
    names = set()
    with open(REQUIREMENTS, encoding="utf-8") as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if line:
                names.add(re.split(r"[\[<>=!~; ]", line, maxsplit=1)[0].lower())
    return names


def test_the_framework_list_matches_the_requirements() -> None:
    """Each framework checked here is one the requirements file installs."""
    required = _required_distributions()
    assert [name for name, _ in FRAMEWORKS if name not in required] == []
    modules = [module for _, module in FRAMEWORKS]
    assert modules.index("paddle") < modules.index("tensorflow")


def test_every_framework_imports() -> None:
    if os.environ.get("TORCHLENS_REQUIRE_FRAMEWORKS") != "1":
        pytest.skip(
            "TORCHLENS_REQUIRE_FRAMEWORKS=1 not set (make test sets it): a missing framework "
            "only skips its own tests here"
        )
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, *[module for _, module in FRAMEWORKS]],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"the import check crashed:\n{result.stderr[-2000:]}"
    missing = json.loads(result.stdout.strip().splitlines()[-1])
    named = [f"{module} ({DISTRIBUTION_OF[module]}): {error}" for module, error in missing]
    listed = "\n".join(named)
    assert not missing, f"frameworks scripts/python-requirements.txt installs do not import:\n{listed}"
