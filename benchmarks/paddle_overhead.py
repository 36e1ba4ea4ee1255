"""How much tl.trace costs on Paddle models, per op, against a plain call (the same call with
nothing installed) and (optionally) the reference implementation, in the same run.

    python benchmarks/paddle_overhead.py [--reference-python PATH] [--repeats N]

``µs/op`` is the whole capture minus a plain call, divided by the trace's ops; ``all µs/op`` is
the whole capture divided by its ops. With ``--reference-python`` the same models run under that
interpreter's ``torchlens`` (the reference, 2.36.1) and the figures print side by side; each
side counts its own ops, and a model the reference cannot trace prints as failed.
"""

from __future__ import annotations

import checkout_root  # noqa: F401  (before the conformance import below: it puts the checkout on sys.path)
import numpy as np
import paddle  # noqa: E402  (Paddle first: it must not be imported after TensorFlow)
import paddle.nn.functional as F  # noqa: E402
from framework_comparison import Battery, main

from conformance.models.paddle import BenchmarkAttention, BenchmarkCnn, BenchmarkMlp


def _normal(seed, shape):
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.1)


def chain(x):
    for _ in range(200):
        x = F.relu(x + 1.0)
    return x


def functions():
    return [
        ("mlp", BenchmarkMlp().eval(), _normal(1, (4, 128))),
        ("small_cnn", BenchmarkCnn().eval(), _normal(2, (2, 3, 16, 16))),
        ("attention", BenchmarkAttention().eval(), _normal(3, (2, 8, 32))),
        ("chain_200", chain, _normal(4, (64,))),
    ]


def _describe(repeats: int) -> str:
    return f"paddle {paddle.__version__}, CPU, median of {repeats}"


BATTERY = Battery(
    entries=functions,
    plain=lambda fn, x: fn(x),
    traced=lambda tl, fn, x, reference: tl.trace(fn, x) if reference else tl.trace(fn, x, backend="paddle"),
    describe=_describe,
)


if __name__ == "__main__":
    main(BATTERY, __doc__, __file__, default_repeats=5)
