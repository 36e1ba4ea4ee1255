"""Small tinygrad models with fixed weights, each with an independent NumPy recomputation of its
forward (the tinygrad battery: MLP, Conv2d CNN, attention, layer norm, a residual block, a
shared layer, a constant read from outside the function, a ``Tensor.ones`` literal producer)."""

from __future__ import annotations

import numpy as np
import tinygrad.nn as nn
from tinygrad import Tensor


def _weights(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.5


def _linear(in_features, out_features, seed):
    layer = nn.Linear(in_features, out_features)
    layer.weight = Tensor(_weights((out_features, in_features), seed))
    layer.bias = Tensor(_weights((out_features,), seed + 1))
    return layer


def _np_linear(layer, x):
    return x @ layer.weight.numpy().T + layer.bias.numpy()


def _np_layernorm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class Mlp:
    def __init__(self):
        self.fc1 = _linear(4, 8, 1)
        self.fc2 = _linear(8, 3, 3)

    def __call__(self, x):
        return self.fc2(self.fc1(x).relu())

    def numpy(self, x):
        return _np_linear(self.fc2, np.maximum(_np_linear(self.fc1, x), 0))


class Cnn:
    def __init__(self):
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.conv.weight = Tensor(_weights((3, 2, 3, 3), 5))
        self.conv.bias = Tensor(_weights((3,), 6))
        self.head = _linear(3, 2, 7)

    def __call__(self, x):
        return self.head(self.conv(x).relu().mean(axis=(2, 3)))

    def numpy(self, x):
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
    def __init__(self):
        self.q, self.k, self.v = _linear(4, 4, 11), _linear(4, 4, 13), _linear(4, 4, 15)

    def __call__(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        return (q @ k.transpose(-1, -2) / 2.0).softmax(-1) @ v

    def numpy(self, x):
        q, k, v = (_np_linear(layer, x) for layer in (self.q, self.k, self.v))
        scores = q @ np.swapaxes(k, -1, -2) / 2.0
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        return scores / scores.sum(-1, keepdims=True) @ v


class Norm:
    def __init__(self):
        self.norm = nn.LayerNorm(4)
        self.norm.weight = Tensor(_weights((4,), 21) + 1)
        self.norm.bias = Tensor(_weights((4,), 22))

    def __call__(self, x):
        return self.norm(x)

    def numpy(self, x):
        return _np_layernorm(x, self.norm.weight.numpy(), self.norm.bias.numpy())


class Residual:
    def __init__(self):
        self.fc = _linear(4, 4, 31)

    def __call__(self, x):
        return x + self.fc(x).relu()

    def numpy(self, x):
        return x + np.maximum(_np_linear(self.fc, x), 0)


class Shared:
    def __init__(self):
        self.fc = _linear(4, 4, 41)
        self.again = self.fc

    def __call__(self, x):
        return self.again(self.fc(x).tanh())

    def numpy(self, x):
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


def input_of(name):
    if name == "cnn":
        return np.random.default_rng(2).standard_normal((2, 2, 5, 5)).astype(np.float32)
    return np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)


def battery():
    """``(name, model, numpy reference)`` for every battery model."""
    entries = [("mlp", Mlp()), ("cnn", Cnn()), ("attention", Attention()), ("layer_norm", Norm())]
    entries += [("residual", Residual()), ("shared_layer", Shared())]
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
