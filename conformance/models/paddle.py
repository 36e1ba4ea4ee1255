"""The standard models in PaddlePaddle (dygraph)."""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from . import BackendModels, input_grads, standard_models


def _fixed(model: nn.Layer, seed: int) -> nn.Layer:
    rng = np.random.default_rng(seed)
    for param in model.parameters():
        param.set_value(rng.standard_normal(param.shape).astype("float32") * 0.5)
    model.eval()
    return model


def _input(seed: int, *shape: int) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


class Mlp(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.fc2 = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Cnn(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2D(2, 3, 3, padding=1)
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        return self.head(F.relu(self.conv(x)).mean(axis=[2, 3]))


class Attention(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(4, 12)
        self.out = nn.Linear(4, 4)

    def forward(self, x):
        q, k, v = paddle.split(self.qkv(x), 3, axis=-1)
        weights = F.softmax(paddle.matmul(q, k, transpose_y=True) / 2.0, axis=-1)
        return self.out(F.relu(paddle.matmul(weights, v)))


class Shared(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        return self.block(F.relu(self.block(x)))


def _build(cls: type, seed: int, shape: tuple) -> Any:
    return lambda: (_fixed(cls(), seed), (_input(seed + 100, *shape),))


MODELS = BackendModels(
    models=standard_models(_build, (Mlp, Cnn, Attention, Shared), "relu"),
    to_array=lambda array: paddle.to_tensor(np.ascontiguousarray(array)),
    grad_options=input_grads("paddle"),
)
