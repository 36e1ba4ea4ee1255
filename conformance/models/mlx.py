"""The standard models in MLX."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from . import BackendModels, input_grads, standard_models


def _fixed(model: nn.Module, seed: int) -> nn.Module:
    rng = np.random.default_rng(seed)
    from mlx.utils import tree_flatten, tree_unflatten

    params = [
        (name, mx.array(rng.standard_normal(value.shape).astype("float32") * 0.5))
        for name, value in tree_flatten(model.parameters())
    ]
    model.update(tree_unflatten(params))
    model.eval()
    return model


def _input(seed: int, *shape: int) -> mx.array:
    return mx.array(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.fc2 = nn.Linear(4, 2)

    def __call__(self, x):
        return self.fc2(nn.relu(self.fc1(x)))


class Cnn(nn.Module):
    # MLX convolutions are channels-last (NHWC).
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.head = nn.Linear(3, 2)

    def __call__(self, x):
        return self.head(nn.relu(self.conv(x)).mean(axis=(1, 2)))


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(4, 12)
        self.out = nn.Linear(4, 4)

    def __call__(self, x):
        q, k, v = mx.split(self.qkv(x), 3, axis=-1)
        weights = mx.softmax(q @ mx.swapaxes(k, -1, -2) / 2.0, axis=-1)
        return self.out(nn.relu(weights @ v))


class Shared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(4, 4)

    def __call__(self, x):
        return self.block(nn.relu(self.block(x)))


def _build(cls: type, seed: int, shape: tuple) -> Any:
    return lambda: (_fixed(cls(), seed), (_input(seed + 100, *shape),))


MODELS = BackendModels(
    models=standard_models(_build, (Mlp, Cnn, Attention, Shared), "relu", channels_last=True),
    to_array=lambda array: mx.array(np.ascontiguousarray(array)),
    grad_options=input_grads("mlx"),
)
