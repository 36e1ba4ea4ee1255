"""The standard models in tinygrad (plain classes holding ``tinygrad.nn`` layers). tinygrad
records ``relu()`` as the ops it lowers to (``cmplt``, ``where``), so the chosen function is
``where``."""

from __future__ import annotations

from typing import Any

import numpy as np
import tinygrad.nn as nn
from tinygrad import Tensor

from . import BackendModels, input_grads, standard_models


def _weights(rng: Any, *shape: int) -> Tensor:
    return Tensor(rng.standard_normal(shape).astype("float32") * 0.5)


def _linear(rng: Any, fan_in: int, fan_out: int) -> nn.Linear:
    layer = nn.Linear(fan_in, fan_out)
    layer.weight, layer.bias = _weights(rng, fan_out, fan_in), _weights(rng, fan_out)
    return layer


class Mlp:
    def __init__(self, rng: Any) -> None:
        self.fc1, self.fc2 = _linear(rng, 3, 4), _linear(rng, 4, 2)

    def __call__(self, x):
        return self.fc2(self.fc1(x).relu())


class Cnn:
    def __init__(self, rng: Any) -> None:
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.conv.weight, self.conv.bias = _weights(rng, 3, 2, 3, 3), _weights(rng, 3)
        self.head = _linear(rng, 3, 2)

    def __call__(self, x):
        return self.head(self.conv(x).relu().mean(axis=(2, 3)))


class Attention:
    def __init__(self, rng: Any) -> None:
        self.qkv, self.out = _linear(rng, 4, 12), _linear(rng, 4, 4)

    def __call__(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = (q @ k.transpose(-1, -2) / 2.0).softmax(-1)
        return self.out((weights @ v).relu())


class Shared:
    def __init__(self, rng: Any) -> None:
        self.block = _linear(rng, 4, 4)

    def __call__(self, x):
        return self.block(self.block(x).relu())


def _build(cls: type, seed: int, shape: tuple) -> Any:
    def build():
        data = np.random.default_rng(seed + 100).standard_normal(shape).astype("float32")
        return cls(np.random.default_rng(seed)), (Tensor(data),)

    return build


MODELS = BackendModels(
    models=standard_models(_build, (Mlp, Cnn, Attention, Shared), "where"),
    to_array=lambda array: Tensor(np.ascontiguousarray(array)),
    grad_options=input_grads("tinygrad"),
)
