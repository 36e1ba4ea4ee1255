"""Small Paddle models for the Paddle backend's tests (the battery of issue 16), each with fixed
weights and an input."""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F


def _fixed(model: nn.Layer, seed: int = 0) -> nn.Layer:
    rng = np.random.default_rng(seed)
    for param in model.parameters():
        param.set_value((rng.standard_normal(param.shape) * 0.5).astype(str(param.dtype).split(".")[-1]))
    return model


def _input(*shape: int, seed: int = 1) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


class Mlp(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x))).tanh()


class Cnn(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2D(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2D(4)
        self.head = nn.Linear(4 * 5 * 5, 3)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        return self.head(paddle.flatten(y, 1))


class Lstm(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 5)
        self.head = nn.Linear(5, 2)

    def forward(self, x):
        out, (_h, _c) = self.lstm(x)
        return self.head(out[:, -1])


class Attention(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiHeadAttention(8, 2)

    def forward(self, x):
        return self.attn(x, x, x)


class Residual(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 6)
        self.fc2 = nn.Linear(6, 6)

    def forward(self, x):
        return F.relu(x + self.fc2(F.relu(self.fc1(x))))


class Shared(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        return self.fc(F.relu(self.fc(x)))


class WithConstant(nn.Layer):
    """Reads a tensor created outside the forward."""

    def __init__(self, constant: paddle.Tensor) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        # Kept in a dict: a Tensor attribute of a Layer would be registered as a buffer.
        self.outside = {"scale": constant}

    def forward(self, x):
        return self.fc(x) * self.outside["scale"]


class InPlace(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = self.fc(x)
        y.add_(paddle.ones_like(y))
        return y


class DropoutTraining(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.drop = nn.Dropout(0.5)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.drop(self.fc(x))


def battery() -> list[Tuple[str, Any, paddle.Tensor]]:
    """The models that trace: ``(name, model in eval mode, input)``."""
    constant = paddle.to_tensor(np.linspace(-1, 1, 6).astype("float32"))
    return [
        ("mlp", _fixed(Mlp()).eval(), _input(2, 6)),
        ("cnn", _fixed(Cnn()).eval(), _input(2, 2, 5, 5)),
        ("lstm", _fixed(Lstm()).eval(), _input(2, 3, 4)),
        ("attention", _fixed(Attention()).eval(), _input(2, 3, 8)),
        ("residual", _fixed(Residual()).eval(), _input(2, 6)),
        ("shared", _fixed(Shared()).eval(), _input(2, 6)),
        ("constant", _fixed(WithConstant(constant)).eval(), _input(2, 6)),
    ]
