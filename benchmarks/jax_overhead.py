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

import checkout_root  # noqa: E402, F401  (before the conformance import below: it puts the checkout on sys.path)
import jax  # noqa: E402
from framework_comparison import Battery, main

from conformance.models.jax import (  # noqa: E402
    benchmark_cnn,
    benchmark_cnn_args,
    benchmark_mlp,
    benchmark_mlp_args,
    benchmark_scan_args,
    benchmark_scan_rnn,
    benchmark_transformer,
    benchmark_transformer_args,
    chain,
    chain_300,
    chain_args,
)


def functions():
    return [
        ("mlp", benchmark_mlp, benchmark_mlp_args()),
        ("mlp_20", benchmark_mlp, benchmark_mlp_args(layers=20)),
        ("small_cnn", benchmark_cnn, benchmark_cnn_args()),
        ("transformer", benchmark_transformer, benchmark_transformer_args()),
        ("chain_300", chain_300, chain_args()),
        ("chain_1000", chain, chain_args()),
        ("scan_rnn_16", benchmark_scan_rnn, benchmark_scan_args()),
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
