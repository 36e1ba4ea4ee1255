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

import checkout_root  # noqa: F401  (before the conformance import below: it puts the checkout on sys.path)
import numpy as np
from framework_comparison import Battery, main
from tinygrad import Tensor

from conformance.models.tinygrad import BenchmarkAttention, BenchmarkCnn, BenchmarkMlp


def _normal(seed, shape):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.1)


def chain(x):
    for _ in range(200):
        x = (x + 1.0).relu()
    return x


def functions():
    for model in (BenchmarkMlp(), BenchmarkCnn(), BenchmarkAttention()):
        for tensor in vars(model).values():
            if isinstance(tensor, Tensor):
                tensor.realize()
    return [
        ("mlp", BenchmarkMlp(), _normal(1, (4, 128))),
        ("small_cnn", BenchmarkCnn(), _normal(2, (2, 3, 16, 16))),
        ("attention", BenchmarkAttention(), _normal(3, (2, 8, 32))),
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
