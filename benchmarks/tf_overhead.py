"""How much tl.trace costs on TensorFlow (Keras 3) models, per op, against a plain call (the same call with
nothing installed) and (optionally) the reference implementation, in the same run.

    python benchmarks/tf_overhead.py [--reference-python PATH] [--repeats N]

``µs/op`` is the whole capture minus a plain call, divided by the trace's ops; ``all µs/op`` is
the whole capture divided by its ops. With ``--reference-python`` the same models run under that
interpreter's ``torchlens`` (the reference, 2.36.1) and the figures print side by side; each
side counts its own ops, and a model the reference cannot trace prints as failed.
"""

from __future__ import annotations

import checkout_root  # noqa: F401  (before the conformance import below: it puts the checkout on sys.path)
import numpy as np
import tensorflow as tf
from framework_comparison import Battery, main

from conformance.models.tf import benchmark_attention, benchmark_cnn, benchmark_mlp


def _normal(seed, shape):
    return tf.constant(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.1)


def _built(model, x):
    model(x)
    return model


def functions():
    mlp, cnn, attention = benchmark_mlp(), benchmark_cnn(), benchmark_attention()

    def chain(x):
        for _ in range(200):
            x = tf.nn.relu(x + 1.0)
        return x

    x_mlp, x_cnn, x_att = _normal(1, (4, 128)), _normal(2, (2, 16, 16, 3)), _normal(3, (2, 8, 32))
    return [
        ("mlp", _built(mlp, x_mlp), x_mlp),
        ("small_cnn", _built(cnn, x_cnn), x_cnn),
        ("attention", _built(attention, x_att), x_att),
        ("chain_200", chain, _normal(4, (64,))),
    ]


def _describe(repeats: int) -> str:
    return f"tensorflow {tf.__version__}, CPU, median of {repeats}"


BATTERY = Battery(
    entries=functions,
    plain=lambda fn, x: fn(x),
    traced=lambda tl, fn, x, reference: tl.trace(fn, x) if reference else tl.trace(fn, x, backend="tf"),
    describe=_describe,
)


if __name__ == "__main__":
    main(BATTERY, __doc__, __file__, default_repeats=5)
