"""The Paddle backend's tutorial model, which the shared contract tests run."""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np
import paddle


def example() -> Tuple[Any, tuple]:
    """A small MLP (``Sequential(Linear, ReLU, Linear)``) with fixed weights, and its input."""
    model = paddle.nn.Sequential(paddle.nn.Linear(3, 4), paddle.nn.ReLU(), paddle.nn.Linear(4, 2))
    rng = np.random.default_rng(0)
    for param in model.parameters():
        param.set_value(rng.standard_normal(param.shape).astype("float32"))
    model.eval()
    return model, (paddle.to_tensor(rng.standard_normal((2, 3)).astype("float32")),)
