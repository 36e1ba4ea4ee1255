"""The tinygrad backend: record every tensor-visible UOp while the lazy graph is built, then
realize every recorded value in one evaluation after the forward returns (realize-once). Its
declaration (``declaration.py``) imports nothing; ``tl.backends.tinygrad.GradOptions`` imports
tinygrad when first read."""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "GradOptions": ".grads",
    "TinygradAdapter": ".adapter",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(module, __name__), name)
