"""The JAX backend: trace the function to a jaxpr once, then evaluate it equation by equation
with real values, reporting each equation to the core. Its declaration (``declaration.py``)
imports nothing; ``tl.backends.jax.GradOptions`` and ``JaxPayloadLoadHint`` import jax when
first read."""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "GradOptions": ".grads",
    "JaxPayloadLoadHint": ".payloads",
    "JaxAdapter": ".adapter",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(module, __name__), name)
