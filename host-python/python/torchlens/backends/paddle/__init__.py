"""The PaddlePaddle backend: dygraph capture through wrapped kernels (``paddle._C_ops``), C++
tensor operators and ``paddle.nn.Layer.__call__``. Its declaration (``declaration.py``) imports
nothing; ``tl.backends.paddle.GradOptions`` imports Paddle when first read."""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "GradOptions": ".grads",
    "PaddleAdapter": ".adapter",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(name)
    from .refusals import check_import_order

    check_import_order()  # Paddle crashes when first imported after TensorFlow
    return getattr(importlib.import_module(module, __name__), name)
