"""How much tl.trace costs on tinygrad functions, per op, against a plain call (the same call
realized once, with nothing installed) and (optionally) the reference implementation, in the
same run.

    python benchmarks/tinygrad_overhead.py [--reference-python PATH] [--repeats N]

``µs/op`` is the whole capture minus a plain realized call, divided by the trace's ops; ``all
µs/op`` is the whole capture divided by its ops (realize-once included). With
``--reference-python`` the same functions run under that interpreter's ``torchlens`` (the
reference, 2.36.1) and the figures print side by side; each side counts its own ops, and a
function the reference cannot trace prints as failed.
"""

from __future__ import annotations

import numpy as np
from framework_comparison import Battery, main
from tinygrad import Tensor


def _normal(seed, shape):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.1)


class Mlp:
    def __init__(self):
        import tinygrad.nn as nn

        self.layers = [nn.Linear(128, 128) for _ in range(8)]
        self.head = nn.Linear(128, 10)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x).relu()
        return self.head(x)


class SmallCnn:
    def __init__(self):
        import tinygrad.nn as nn

        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def __call__(self, x):
        x = self.conv1(x).relu().max_pool2d(2)
        x = self.conv2(x).relu().mean(axis=(2, 3))
        return self.head(x)


class Attention:
    def __init__(self, dim=32, blocks=2):
        import tinygrad.nn as nn

        self.blocks = [
            (nn.Linear(dim, 3 * dim), nn.Linear(dim, dim), nn.LayerNorm(dim)) for _ in range(blocks)
        ]

    def __call__(self, x):
        for qkv, out, norm in self.blocks:
            q, k, v = qkv(norm(x)).chunk(3, dim=-1)
            x = x + out((q @ k.transpose(-1, -2) / 32**0.5).softmax(-1) @ v)
        return x


def chain(x):
    for _ in range(200):
        x = (x + 1.0).relu()
    return x


def functions():
    for model in (Mlp(), SmallCnn(), Attention()):
        for tensor in vars(model).values():
            if isinstance(tensor, Tensor):
                tensor.realize()
    return [
        ("mlp", Mlp(), _normal(1, (4, 128))),
        ("small_cnn", SmallCnn(), _normal(2, (2, 3, 16, 16))),
        ("attention", Attention(), _normal(3, (2, 8, 32))),
        ("chain_200", chain, _normal(4, (64,))),
    ]


def _describe(repeats: int) -> str:
    import tinygrad

    version = getattr(tinygrad, "__version__", None)
    if version is None:
        from importlib.metadata import version as installed

        version = installed("tinygrad")
    return f"tinygrad {version}, default device, median of {repeats}"


BATTERY = Battery(
    entries=functions,
    plain=lambda fn, x: fn(x).realize(),
    traced=lambda tl, fn, x, reference: tl.trace(fn, x, backend="tinygrad"),
    describe=_describe,
)


if __name__ == "__main__":
    main(BATTERY, __doc__, __file__, default_repeats=5)
