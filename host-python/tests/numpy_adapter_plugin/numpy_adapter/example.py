"""The NumPy adapter's tutorial model, which the shared contract tests run."""

from __future__ import annotations

from typing import Any, Tuple

import numpy

from .model import Module


class Linear(Module):
    def __init__(self, rng: Any, inputs: int, outputs: int) -> None:
        self.weight = rng.standard_normal((inputs, outputs))
        self.bias = rng.standard_normal(outputs)

    def forward(self, x: Any) -> Any:
        return numpy.add(numpy.matmul(x, self.weight), self.bias)


class Mlp(Module):
    def __init__(self) -> None:
        rng = numpy.random.default_rng(0)
        self.fc1 = Linear(rng, 3, 4)
        self.fc2 = Linear(rng, 4, 2)

    def forward(self, x: Any) -> Any:
        return numpy.tanh(self.fc2(numpy.maximum(self.fc1(x), 0.0)))


def example() -> Tuple[Any, tuple]:
    """A small MLP and its input."""
    return Mlp(), (numpy.linspace(-2.0, 2.0, 6).reshape(2, 3),)
