"""How much tl.trace costs on JAX functions, against a plain (eager) call and, optionally, the
reference implementation, in the same run.

    python benchmarks/jax_overhead.py [--reference-python PATH] [--repeats N]

For each function: the plain call (``block_until_ready``), ``tl.trace(..., backend="jax")``
saving every op, the capture cost per op above the plain call (``µs/op``) and the whole capture
divided by its ops (``all µs/op``). ``first ms`` is the first capture of the function in the
process (it traces the jaxpr and compiles each primitive's executable on first use); ``full ms``
is the median of the captures after it, which reuse the jaxpr (traced once per call signature,
like ``jax.jit``). The plain call can cost more than a capture: an eager ``lax.scan`` compiles
on every call, and eager ``jax.numpy`` pays its wrappers per op where the capture calls each
primitive's executable directly; ``all µs/op`` compares there. With ``--reference-python`` the
same functions run under that interpreter's ``torchlens`` (the reference, 2.36.1) and the
figures print side by side; each side counts its own ops; ``speed-up`` is the reference's
``all µs/op`` over ours.

``chain_300`` and ``mlp_20`` are the functions the performance issue names (a 300-op chain and a
20-layer MLP).
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from framework_comparison import Battery, main
from jax import lax  # noqa: E402


def _normal(seed: int, shape: tuple) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), shape, dtype=jnp.float32)


def mlp(params, x):
    for layer in params:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x


def mlp_args(layers: int = 8):
    weights = [{"w": _normal(i, (256, 256)) * 0.05, "b": _normal(100 + i, (256,))} for i in range(layers)]
    return weights, _normal(0, (32, 256))


def cnn(params, x):
    dims = ("NCHW", "OIHW", "NCHW")
    y = jax.nn.relu(lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME", dimension_numbers=dims))
    y = jax.nn.relu(lax.conv_general_dilated(y, params["k2"], (2, 2), "SAME", dimension_numbers=dims))
    return jnp.mean(y, axis=(2, 3)) @ params["head"]


def cnn_args():
    params = {"k1": _normal(1, (16, 3, 3, 3)), "k2": _normal(2, (32, 16, 3, 3)), "head": _normal(3, (32, 10))}
    return params, _normal(4, (8, 3, 32, 32))


def transformer(params, x):
    for block in params:
        q, k, v = x @ block["q"], x @ block["k"], x @ block["v"]
        attention = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / 8.0, axis=-1)
        x = x + attention @ v @ block["o"]
        x = x + jax.nn.gelu(x @ block["up"]) @ block["down"]
    return x


def transformer_args():
    blocks = [
        {
            "q": _normal(10 * i, (64, 64)) * 0.1,
            "k": _normal(10 * i + 1, (64, 64)) * 0.1,
            "v": _normal(10 * i + 2, (64, 64)) * 0.1,
            "o": _normal(10 * i + 3, (64, 64)) * 0.1,
            "up": _normal(10 * i + 4, (64, 256)) * 0.1,
            "down": _normal(10 * i + 5, (256, 64)) * 0.1,
        }
        for i in range(4)
    ]
    return blocks, _normal(5, (2, 32, 64))


def chain(params, x, steps=500):
    for _ in range(steps):
        x = jax.nn.relu(x) + params["c"]
    return x


def chain_300(params, x):
    """The issue's "300-op chain": 150 steps of two ops."""
    return chain(params, x, steps=150)


def chain_args():
    return {"c": jnp.float32(1.0)}, _normal(6, (4,))


def scan_rnn(params, xs):
    def cell(h, x):
        return jnp.tanh(h @ params["wh"] + x @ params["wx"]), None

    return lax.scan(cell, jnp.zeros((4, 32)), xs)[0]


def scan_args():
    return {"wh": _normal(7, (32, 32)) * 0.1, "wx": _normal(8, (16, 32))}, _normal(9, (16, 4, 16))


def functions():
    return [
        ("mlp", mlp, mlp_args()),
        ("mlp_20", mlp, mlp_args(layers=20)),
        ("small_cnn", cnn, cnn_args()),
        ("transformer", transformer, transformer_args()),
        ("chain_300", chain_300, chain_args()),
        ("chain_1000", chain, chain_args()),
        ("scan_rnn_16", scan_rnn, scan_args()),
    ]


def _describe(repeats: int) -> str:
    return f"jax {jax.__version__}, CPU, median of {repeats}"


def _traced(tl, fn, x, reference: bool):
    """One capture, counted until its output is computed: JAX dispatches asynchronously, so a
    capture (like a plain call) can return before XLA has run its last ops."""
    trace = tl.trace(fn, x, backend="jax")
    if reference:
        jax.block_until_ready(trace[-1].out)  # the reference's last op is the output
    else:
        # Every value the capture computed (its runtime values; ``trace.outputs`` would first
        # build every op object, which is the cost of reading a trace, not of capturing it).
        jax.block_until_ready(list(trace._runtime.values.values()))
    return trace


BATTERY = Battery(
    entries=functions,
    plain=lambda fn, x: jax.block_until_ready(fn(*x)),
    traced=_traced,
    describe=_describe,
)


if __name__ == "__main__":
    main(BATTERY, __doc__, __file__, default_repeats=7)
