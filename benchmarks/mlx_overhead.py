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

import checkout_root  # noqa: F401  (before the conformance import below: it puts the checkout on sys.path)
import mlx.core as mx
import mlx.nn as nn
import numpy as np
from framework_comparison import Battery, main

from conformance.models.mlx import BenchmarkAttention, BenchmarkCnn, BenchmarkMlp


def _normal(seed, shape):
    return mx.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.1)


def chain(x):
    for _ in range(200):
        x = nn.relu(x + 1.0)
    return x


def functions():
    mx.random.seed(0)
    models = [BenchmarkMlp(), BenchmarkCnn(), BenchmarkAttention()]
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
