"""The backends a parametrised test runs over, each case marked with the backend's name (so
``pytest -m jax`` runs JAX's cells), and the skip, with its reason, of a backend whose framework
is not installed here. One definition for every suite that runs over the backends."""

from __future__ import annotations

from typing import Any, List

import pytest

import torchlens as tl
from torchlens.backends.registry import built_in_specs
from torchlens.errors import BackendUnsupportedError


def backend_params(built: bool = True, built_in_only: bool = False) -> List[Any]:
    """The registered backends that are built (or, with ``built=False``, planned), sorted by
    name, which also imports Paddle before TensorFlow (Paddle crashes when imported after it);
    ``built_in_only`` leaves out plugins from other packages (the NumPy test adapter)."""
    specs = built_in_specs() if built_in_only else tl.backends.specs()
    return [
        pytest.param(spec.name, marks=getattr(pytest.mark, spec.name.replace("-", "_")))
        for spec in sorted(specs, key=lambda spec: spec.name)
        if (spec.adapter is not None) == built
    ]


def require_installed(name: str) -> None:
    """Skips the test, saying why, when the backend's framework is not installed."""
    try:
        tl.backends.require_framework(tl.backends.get_spec(name))
    except BackendUnsupportedError as error:
        pytest.skip(f"{name}: {error.message}")
