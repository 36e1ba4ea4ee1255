"""The MLX models: the conformance suite's four standard models (:data:`MODELS`) and the MLX
tests' battery (:func:`battery`). MLX convolutions are channels-last (NHWC)."""

from __future__ import annotations

from functools import partial
from typing import Any, Dict, Tuple

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
    """Two linear layers around a ReLU; ``after`` counts the forwards that got past the last
    layer (early stop leaves it unchanged). The standard model is the defaults."""

    def __init__(self, features: int = 3, hidden: int = 4, classes: int = 2) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, classes)
        self.after = 0

    def __call__(self, x):
        out = self.fc2(nn.relu(self.fc1(x)))
        self.after += 1
        return out


class Cnn(nn.Module):
    """A convolution, a ReLU, a max pool where ``pool``, a spatial mean and a linear head. The
    standard model is ``Cnn(2, 3, padding=1, pool=False)``; the battery's is the defaults."""

    def __init__(self, in_channels: int = 3, channels: int = 4, padding: int = 0, pool: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 3, padding=padding)
        self.pool = nn.MaxPool2d(2) if pool else None
        self.head = nn.Linear(channels, 2)

    def __call__(self, x):
        h = nn.relu(self.conv(x))
        if self.pool is not None:
            h = self.pool(h)
        return self.head(h.mean(axis=(1, 2)))


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
    """One linear layer called twice, a ReLU between."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(4, 4)

    def __call__(self, x):
        return self.block(nn.relu(self.block(x)))


def _build(cls: Any, seed: int, shape: tuple) -> Any:
    return lambda: (_fixed(cls(), seed), (_input(seed + 100, *shape),))


MODELS = BackendModels(
    models=standard_models(
        _build,
        (Mlp, partial(Cnn, 2, 3, padding=1, pool=False), Attention, Shared),
        "relu",
        channels_last=True,
    ),
    to_array=lambda array: mx.array(np.ascontiguousarray(array)),
    grad_options=input_grads("mlx"),
)


# The battery: the standard MLP (wider) and CNN (pooled), and the models below.


class Block(nn.Module):
    """A pre-norm transformer block on MLX's own multi-head attention."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiHeadAttention(8, 2)
        self.norm1 = nn.LayerNorm(8)
        self.norm2 = nn.LayerNorm(8)
        self.ff = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def __call__(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h)
        return x + self.ff(self.norm2(x))


class Rnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(4, 4)

    def __call__(self, x):
        h = mx.zeros((x.shape[0], 4))
        for step in range(3):
            h = mx.tanh(self.cell(h) + x[:, step])
        return h


class SharedLayers(nn.Module):
    """A list of two layers, the first also reachable as ``alias`` and called twice."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = [nn.Linear(4, 4), nn.Linear(4, 4)]
        self.alias = self.layers[0]

    def __call__(self, x):
        return self.layers[1](self.alias(self.layers[0](x)))


SCALE = mx.array([2.0, -1.0, 0.5, 3.0])


def with_constant(x):
    return (x * SCALE).sum(axis=-1)


def battery() -> Dict[str, Tuple[Any, tuple]]:
    """``{name: (model, positional inputs)}``, weights and inputs from MLX's seeded generator."""
    mx.random.seed(0)
    return {
        "mlp": (Mlp(hidden=8), (mx.random.normal((2, 3)),)),
        "cnn": (Cnn(), (mx.random.normal((1, 6, 6, 3)),)),
        "attention": (nn.MultiHeadAttention(8, 2), (mx.random.normal((1, 5, 8)),) * 3),
        "block": (Block(), (mx.random.normal((1, 5, 8)),)),
        "rnn": (Rnn(), (mx.random.normal((2, 3, 4)),)),
        "shared": (SharedLayers(), (mx.random.normal((2, 4)),)),
        "constant": (with_constant, (mx.random.normal((2, 4)),)),
    }


# The benchmark models: the workloads benchmarks/mlx_overhead.py times, at the sizes
# docs/performance.md publishes.


class BenchmarkMlp(nn.Module):
    """Eight 128-wide linear layers with ReLUs, then a 10-way head."""

    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(128, 128) for _ in range(8)]
        self.head = nn.Linear(128, 10)

    def __call__(self, x):
        for layer in self.layers:
            x = nn.relu(layer(x))
        return self.head(x)


class BenchmarkCnn(nn.Module):
    """Two convolutions (ReLU, max pool between), averaged, then a 10-way head."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def __call__(self, x):
        x = self.pool(nn.relu(self.conv1(x)))
        x = nn.relu(self.conv2(x)).mean(axis=(1, 2))
        return self.head(x)


class BenchmarkAttention(nn.Module):
    """Stacked attention blocks of width ``dim``."""

    def __init__(self, dim=32, blocks=2):
        super().__init__()
        self.qkv = [nn.Linear(dim, 3 * dim) for _ in range(blocks)]
        self.out = [nn.Linear(dim, dim) for _ in range(blocks)]
        self.norm = [nn.LayerNorm(dim) for _ in range(blocks)]

    def __call__(self, x):
        for qkv, out, norm in zip(self.qkv, self.out, self.norm):
            q, k, v = mx.split(qkv(norm(x)), 3, axis=-1)
            x = x + out(mx.softmax(q @ k.swapaxes(-1, -2) / 32**0.5, axis=-1) @ v)
        return x
