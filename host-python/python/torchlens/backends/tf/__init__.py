"""The TensorFlow backend: eager capture through TensorFlow's op callbacks, Keras
``Layer.__call__`` and ``tf.Module`` call frames. Its declaration (``declaration.py``) imports
nothing; ``tl.backends.tf.GradOptions`` and ``TFAdapter`` import TensorFlow when first read."""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "GradOptions": ".grads",
    "TFAdapter": ".adapter",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(module, __name__), name)
