"""The MLX backend: an inventory of wrapped ``mlx.core`` functions, ``mx.array`` methods and
operators, and ``mlx.nn.Module`` calls, installed for the duration of one forward and always
removed; every recorded value is realized in one ``mx.eval`` after the forward returns
(realize-once). Its declaration (``declaration.py``) imports nothing;
``tl.backends.mlx.GradOptions`` imports MLX when first read."""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "GradOptions": ".grads",
    "MlxAdapter": ".adapter",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(module, __name__), name)
