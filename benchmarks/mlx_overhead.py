"""How much tl.trace costs on MLX models, per op, against a plain call (the same call evaluated
once with ``mx.eval``, nothing installed) and (optionally) the reference implementation, in the
same run.

    python benchmarks/mlx_overhead.py [--reference-python PATH] [--repeats N]

``µs/op`` is the whole capture minus a plain evaluated call, divided by the trace's ops; ``all
µs/op`` is the whole capture divided by its ops (realize-once included). With
``--reference-python`` the same models run under that interpreter's ``torchlens`` (the
reference, 2.36.1) and the figures print side by side; each side counts its own ops, and a
model the reference cannot trace prints as failed.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from framework_comparison import Battery, main


def _normal(seed, shape):
    return mx.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.1)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(128, 128) for _ in range(8)]
        self.head = nn.Linear(128, 10)

    def __call__(self, x):
        for layer in self.layers:
            x = nn.relu(layer(x))
        return self.head(x)


class SmallCnn(nn.Module):
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


class Attention(nn.Module):
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


def chain(x):
    for _ in range(200):
        x = nn.relu(x + 1.0)
    return x


def functions():
    mx.random.seed(0)
    models = [Mlp(), SmallCnn(), Attention()]
    for model in models:
        mx.eval(model.parameters())
    return [
        ("mlp", models[0], _normal(1, (4, 128))),
        ("small_cnn", models[1], _normal(2, (2, 16, 16, 3))),
        ("attention", models[2], _normal(3, (2, 8, 32))),
        ("chain_200", chain, _normal(4, (64,))),
    ]


def _describe(repeats: int) -> str:
    return f"MLX {mx.__version__}, default device, median of {repeats}"


BATTERY = Battery(
    entries=functions,
    plain=lambda fn, x: mx.eval(fn(x)),
    traced=lambda tl, fn, x, reference: tl.trace(fn, x, backend="mlx"),
    describe=_describe,
)


if __name__ == "__main__":
    main(BATTERY, __doc__, __file__, default_repeats=5)
