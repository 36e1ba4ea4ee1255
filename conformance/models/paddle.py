"""The PaddlePaddle (dygraph) models: the conformance suite's four standard models
(:data:`MODELS`) and the Paddle tests' battery (:func:`battery`), each with fixed weights and an
input."""

from __future__ import annotations

from functools import partial
from typing import Any, List, Tuple

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from . import BackendModels, input_grads, standard_models


def _fixed(model: nn.Layer, seed: int = 0) -> nn.Layer:
    rng = np.random.default_rng(seed)
    for param in model.parameters():
        param.set_value(rng.standard_normal(param.shape).astype("float32") * 0.5)
    model.eval()
    return model


def _input(*shape: int, seed: int = 1) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


class Mlp(nn.Layer):
    """Two linear layers around a ReLU, then a tanh where ``squash``. The standard model is
    ``Mlp(3, 4, 2, squash=False)``; the battery's (the defaults) is wider and squashed."""

    def __init__(self, features: int = 6, hidden: int = 8, classes: int = 3, squash: bool = True) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, classes)
        self.squash = squash

    def forward(self, x):
        y = self.fc2(F.relu(self.fc1(x)))
        return y.tanh() if self.squash else y


class Cnn(nn.Layer):
    """A convolution, a batch norm where ``batchnorm``, a ReLU, a spatial mean and a linear head.
    The standard model is ``Cnn(3, 2, batchnorm=False)``; the battery's is the defaults."""

    def __init__(self, channels: int = 4, classes: int = 3, batchnorm: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2D(2, channels, 3, padding=1)
        self.bn = nn.BatchNorm2D(channels) if batchnorm else None
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        y = self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        return self.head(F.relu(y).mean(axis=[2, 3]))


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
    """One linear layer called twice, a ReLU between. The standard model is ``Shared(4)``; the
    battery's (the default) is wider."""

    def __init__(self, features: int = 6) -> None:
        super().__init__()
        self.block = nn.Linear(features, features)

    def forward(self, x):
        return self.block(F.relu(self.block(x)))


def _build(cls: Any, seed: int, shape: tuple) -> Any:
    return lambda: (_fixed(cls(), seed), (_input(*shape, seed=seed + 100),))


MODELS = BackendModels(
    models=standard_models(
        _build,
        (
            partial(Mlp, 3, 4, 2, squash=False),
            partial(Cnn, 3, 2, batchnorm=False),
            Attention,
            partial(Shared, 4),
        ),
        "relu",
    ),
    to_array=lambda array: paddle.to_tensor(np.ascontiguousarray(array)),
    grad_options=input_grads("paddle"),
)


# The battery: the standard MLP, CNN and shared layer (wider, the MLP squashed, the CNN with a
# batch norm), and the models below.


class Lstm(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 5)
        self.head = nn.Linear(5, 2)

    def forward(self, x):
        out, (_h, _c) = self.lstm(x)
        return self.head(out[:, -1])


class MultiHead(nn.Layer):
    """Paddle's own multi-head attention layer (the standard model writes attention out)."""

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


class Counting(nn.Layer):
    """Counts its forward calls, to show a refusal came before the model ran."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return F.relu(self.fc(x))


def battery() -> List[Tuple[str, Any, paddle.Tensor]]:
    """The models that trace: ``(name, model in eval mode, input)``."""
    constant = paddle.to_tensor(np.linspace(-1, 1, 6).astype("float32"))
    return [
        ("mlp", _fixed(Mlp()), _input(2, 6)),
        ("cnn", _fixed(Cnn()), _input(2, 2, 5, 5)),
        ("lstm", _fixed(Lstm()), _input(2, 3, 4)),
        ("attention", _fixed(MultiHead()), _input(2, 3, 8)),
        ("residual", _fixed(Residual()), _input(2, 6)),
        ("shared", _fixed(Shared()), _input(2, 6)),
        ("constant", _fixed(WithConstant(constant)), _input(2, 6)),
    ]


# The benchmark models: the workloads benchmarks/paddle_overhead.py times, at the sizes
# docs/performance.md publishes.


class BenchmarkMlp(nn.Layer):
    """Eight 128-wide linear layers with ReLUs, then a 10-way head."""

    def __init__(self):
        super().__init__()
        self.layers = nn.LayerList([nn.Linear(128, 128) for _ in range(8)])
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.head(x)


class BenchmarkCnn(nn.Layer):
    """Two convolutions (ReLU, max pool between), averaged, then a 10-way head."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2D(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2D(8)
        self.conv2 = nn.Conv2D(8, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.relu(self.conv2(x)).mean(axis=[2, 3])
        return self.head(x)


class BenchmarkAttention(nn.Layer):
    """Stacked attention blocks of width ``dim``."""

    def __init__(self, dim=32, blocks=2):
        super().__init__()
        self.blocks = nn.LayerList(
            [nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.0) for _ in range(blocks)]
        )

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
