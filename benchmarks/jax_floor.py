"""The floor under a JAX capture that observes every intermediate value: each equation of the
function's jaxpr run as its own jitted executable, in order, with nothing recorded.

    python benchmarks/jax_floor.py [--repeats N]

Observing every intermediate with the bits eager JAX gives means one XLA executable per
equation (a whole-function program fuses ops and changes bits; see docs/decisions.md,
"No whole-jaxpr XLA program"). This script builds those executables once per equation (as the capture caches
them) and times running them back to back, beside the whole function jitted, eager JAX and
``tl.trace``, in turns, for the JAX workloads the performance issue sets targets on
(``jax_overhead.py``'s ``mlp_20`` and ``chain_300``). What a capture costs above this floor is
TorchLens's own work; the floor itself is XLA's dispatch.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
from jax.extend import core as jax_core  # noqa: E402
from jax_overhead import BATTERY  # noqa: E402
from measurement import interleaved  # noqa: E402

#: The workloads the issue's JAX target names (``jax_overhead.py``'s, with the same inputs).
WORKLOADS = ("mlp_20", "chain_300")


def per_equation(fn, args):
    """A runner that evaluates ``fn``'s jaxpr one equation at a time, each equation a jitted
    executable made once here; returns the runner and the number of equations."""
    closed = jax.make_jaxpr(fn)(*args)
    jaxpr = closed.jaxpr
    steps = []
    for equation in jaxpr.eqns:
        primitive = equation.primitive
        params = primitive.get_bind_params(equation.params)

        def bind(*values, primitive=primitive, params=params):
            return primitive.bind(*values, **params)

        steps.append((jax.jit(bind), equation.invars, equation.outvars, primitive.multiple_results))
    flat_args = jax.tree_util.tree_leaves(args)

    def run():
        env = dict(zip(jaxpr.constvars, closed.consts))
        env.update(zip(jaxpr.invars, flat_args))

        def read(var):
            return var.val if isinstance(var, jax_core.Literal) else env[var]

        for executable, invars, outvars, multiple in steps:
            results = executable(*[read(var) for var in invars])
            if not multiple:
                results = [results]
            env.update(zip(outvars, results))
        outputs = [read(var) for var in jaxpr.outvars]
        jax.block_until_ready(outputs)
        return outputs

    return run, len(jaxpr.eqns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=41)
    options = parser.parse_args()
    import torchlens as tl

    print("| function | equations | eager ms | jitted whole ms | executable per equation ms | trace ms |")
    print("|---|---|---|---|---|---|")
    for name, fn, args in BATTERY.entries():
        if name not in WORKLOADS:
            continue
        floor, equations = per_equation(fn, args)
        jitted = jax.jit(fn)
        runs = {
            "eager": lambda fn=fn, args=args: BATTERY.plain(fn, args),
            "jitted": lambda jitted=jitted, args=args: jax.block_until_ready(jitted(*args)),
            "floor": floor,
            # As jax_overhead.py times a capture: until every value it computed is ready.
            "trace": lambda fn=fn, args=args: BATTERY.traced(tl, fn, args, False),
        }
        times = interleaved(runs, options.repeats)
        print(
            f"| {name} | {equations} | {times['eager'] * 1e3:.2f} | {times['jitted'] * 1e3:.2f} | "
            f"{times['floor'] * 1e3:.2f} | {times['trace'] * 1e3:.2f} |"
        )


if __name__ == "__main__":
    main()
