"""The MLX backend's tutorial model, which the shared contract tests run."""

from __future__ import annotations

from typing import Any, Tuple

import mlx.core as mx
import mlx.nn as nn
import numpy as np


def example() -> Tuple[Any, tuple]:
    """The spec's MLX tutorial model (Linear, ReLU, Linear) with fixed weights, and its input."""
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model.layers[0].weight = mx.array(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3))
    model.layers[0].bias = mx.array(np.linspace(-0.5, 0.5, 4, dtype=np.float32))
    model.layers[2].weight = mx.array(np.linspace(1.0, -1.0, 8, dtype=np.float32).reshape(2, 4))
    model.layers[2].bias = mx.array(np.zeros(2, dtype=np.float32))
    model.eval()
    return model, (mx.array(np.linspace(-2.0, 2.0, 6, dtype=np.float32).reshape(2, 3)),)
