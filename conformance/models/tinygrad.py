"""The tinygrad models (plain classes holding ``tinygrad.nn`` layers): the conformance suite's four
standard models (:data:`MODELS`) and the tinygrad tests' battery (:func:`battery`: MLP, Conv2d
CNN, attention, layer norm, a residual block, a shared layer, a constant read from outside the
function, a ``Tensor.ones`` literal producer), each with an independent NumPy recomputation of
its forward (``numpy(x)``). tinygrad records ``relu()`` as the ops it lowers to (``cmplt``,
``where``), so the standard models' chosen function is ``where``."""

from __future__ import annotations

from functools import partial
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


def _np_linear(layer: nn.Linear, x: np.ndarray) -> np.ndarray:
    return x @ layer.weight.numpy().T + layer.bias.numpy()


def _np_softmax(scores: np.ndarray) -> np.ndarray:
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    return scores / scores.sum(-1, keepdims=True)


class Mlp:
    """Two linear layers around a ReLU. The standard model is ``Mlp(seed, 3, 4, 2)``; the
    battery's (the defaults) is wider."""

    def __init__(self, seed: int = 1, features: int = 4, hidden: int = 8, classes: int = 3) -> None:
        rng = np.random.default_rng(seed)
        self.fc1, self.fc2 = _linear(rng, features, hidden), _linear(rng, hidden, classes)

    def __call__(self, x):
        return self.fc2(self.fc1(x).relu())

    def numpy(self, x: np.ndarray) -> np.ndarray:
        return _np_linear(self.fc2, np.maximum(_np_linear(self.fc1, x), 0))


class Cnn:
    def __init__(self, seed: int = 1) -> None:
        rng = np.random.default_rng(seed)
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.conv.weight, self.conv.bias = _weights(rng, 3, 2, 3, 3), _weights(rng, 3)
        self.head = _linear(rng, 3, 2)

    def __call__(self, x):
        return self.head(self.conv(x).relu().mean(axis=(2, 3)))

    def numpy(self, x: np.ndarray) -> np.ndarray:
        w, b = self.conv.weight.numpy(), self.conv.bias.numpy()
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        n, _, h, width = x.shape
        out = np.zeros((n, 3, h, width), np.float32)
        for i in range(h):
            for j in range(width):
                patch = padded[:, :, i : i + 3, j : j + 3]
                out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w) + b
        return _np_linear(self.head, np.maximum(out, 0).mean(axis=(2, 3)))


class Attention:
    def __init__(self, seed: int = 2) -> None:
        rng = np.random.default_rng(seed)
        self.qkv, self.out = _linear(rng, 4, 12), _linear(rng, 4, 4)

    def __call__(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = (q @ k.transpose(-1, -2) / 2.0).softmax(-1)
        return self.out((weights @ v).relu())

    def numpy(self, x: np.ndarray) -> np.ndarray:
        q, k, v = np.split(_np_linear(self.qkv, x), 3, axis=-1)
        weights = _np_softmax(q @ np.swapaxes(k, -1, -2) / 2.0)
        return _np_linear(self.out, np.maximum(weights @ v, 0))


class Shared:
    def __init__(self, seed: int = 3) -> None:
        self.block = _linear(np.random.default_rng(seed), 4, 4)

    def __call__(self, x):
        return self.block(self.block(x).relu())


def _build(cls: Any, seed: int, shape: tuple) -> Any:
    def build():
        data = np.random.default_rng(seed + 100).standard_normal(shape).astype("float32")
        return cls(seed), (Tensor(data),)

    return build


MODELS = BackendModels(
    models=standard_models(
        _build, (partial(Mlp, features=3, hidden=4, classes=2), Cnn, Attention, Shared), "where"
    ),
    to_array=lambda array: Tensor(np.ascontiguousarray(array)),
    grad_options=input_grads("tinygrad"),
)


# The battery: the standard MLP (wider), CNN and attention, and the models below.


class Norm:
    def __init__(self) -> None:
        rng = np.random.default_rng(21)
        self.norm = nn.LayerNorm(4)
        self.norm.weight, self.norm.bias = _weights(rng, 4) + 1, _weights(rng, 4)

    def __call__(self, x):
        return self.norm(x)

    def numpy(self, x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * self.norm.weight.numpy() + self.norm.bias.numpy()


class Residual:
    def __init__(self) -> None:
        self.fc = _linear(np.random.default_rng(31), 4, 4)

    def __call__(self, x):
        return x + self.fc(x).relu()

    def numpy(self, x: np.ndarray) -> np.ndarray:
        return x + np.maximum(_np_linear(self.fc, x), 0)


class SharedLayer:
    """One layer reachable under two names (``fc``, ``again``) and called twice."""

    def __init__(self) -> None:
        self.fc = _linear(np.random.default_rng(41), 4, 4)
        self.again = self.fc

    def __call__(self, x):
        return self.again(self.fc(x).tanh())

    def numpy(self, x: np.ndarray) -> np.ndarray:
        return _np_linear(self.fc, np.tanh(_np_linear(self.fc, x)))


OUTSIDE = Tensor(np.array([0.5, -1.0, 2.0, 0.25], np.float32))


def with_outside_constant(x):
    return (x * OUTSIDE).sum(axis=-1)


def _np_with_outside_constant(x):
    return (x * OUTSIDE.numpy()).sum(axis=-1)


def with_ones(x):
    return x + Tensor.ones(*x.shape) * 3.0


def _np_with_ones(x):
    return x + 3.0


def input_of(name: str) -> np.ndarray:
    """The battery model ``name``'s input."""
    if name == "cnn":
        return np.random.default_rng(2).standard_normal((2, 2, 5, 5)).astype(np.float32)
    return np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)


def battery() -> list:
    """``(name, model, numpy reference)`` for every battery model."""
    entries = [("mlp", Mlp()), ("cnn", Cnn()), ("attention", Attention()), ("layer_norm", Norm())]
    entries += [("residual", Residual()), ("shared_layer", SharedLayer())]
    cases = [(name, model, model.numpy) for name, model in entries]
    cases.append(("outside_constant", with_outside_constant, _np_with_outside_constant))
    cases.append(("literal_producer", with_ones, _np_with_ones))
    return cases


# The spec's two tinygrad examples, as the spec writes them.


def fn(x):
    return ((x + 1).relu() * 2).sum()


class TinyMlp:
    def __init__(self):
        self.fc = nn.Linear(3, 4)

    def __call__(self, x):
        return self.fc(x).relu()


# The benchmark models: the workloads benchmarks/tinygrad_overhead.py times, at the sizes
# docs/performance.md publishes.


class BenchmarkMlp:
    """Eight 128-wide linear layers with ReLUs, then a 10-way head."""

    def __init__(self):
        self.layers = [nn.Linear(128, 128) for _ in range(8)]
        self.head = nn.Linear(128, 10)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x).relu()
        return self.head(x)


class BenchmarkCnn:
    """Two convolutions (ReLU, max pool between), averaged, then a 10-way head."""

    def __init__(self):
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def __call__(self, x):
        x = self.conv1(x).relu().max_pool2d(2)
        x = self.conv2(x).relu().mean(axis=(2, 3))
        return self.head(x)


class BenchmarkAttention:
    """Stacked attention blocks of width ``dim``."""

    def __init__(self, dim=32, blocks=2):
        self.blocks = [
            (nn.Linear(dim, 3 * dim), nn.Linear(dim, dim), nn.LayerNorm(dim)) for _ in range(blocks)
        ]

    def __call__(self, x):
        for qkv, out, norm in self.blocks:
            q, k, v = qkv(norm(x)).chunk(3, dim=-1)
            x = x + out((q @ k.transpose(-1, -2) / 32**0.5).softmax(-1) @ v)
        return x
