"""The tinygrad backend's tutorial model, which the shared contract tests run."""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np
import tinygrad.nn as nn
from tinygrad import Tensor


class TinyMlp:
    """Two linear layers with a ReLU between them, with fixed weights."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(3, 4)
        self.fc2 = nn.Linear(4, 2)
        self.fc1.weight = Tensor(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3))
        self.fc1.bias = Tensor(np.linspace(-0.5, 0.5, 4, dtype=np.float32))
        self.fc2.weight = Tensor(np.linspace(1.0, -1.0, 8, dtype=np.float32).reshape(2, 4))
        self.fc2.bias = Tensor(np.zeros(2, dtype=np.float32))

    def __call__(self, x: Tensor) -> Tensor:
        return self.fc2(self.fc1(x).relu()).tanh()


def example() -> Tuple[Any, tuple]:
    """A small tinygrad MLP object and its input."""
    return TinyMlp(), (Tensor(np.linspace(-2.0, 2.0, 6, dtype=np.float32).reshape(2, 3)),)
