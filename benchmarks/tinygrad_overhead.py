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

import argparse
import json
from typing import Optional

import numpy as np
from measurement import measure_in_reference_python, timed
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


def measure(repeats: int, reference: bool, only: Optional[str] = None) -> dict:
    import torchlens as tl

    results = {}
    for name, fn, x in functions():
        if only is not None and name != only:
            continue
        plain = timed(lambda fn=fn, x=x: fn(x).realize(), repeats)
        try:
            trace = tl.trace(fn, x, backend="tinygrad")
            ops = len(trace.ops)
            full = timed(lambda fn=fn, x=x: tl.trace(fn, x, backend="tinygrad"), repeats)
        except Exception as error:  # the reference refuses or breaks on some functions
            results[name] = {"failed": f"{type(error).__name__}: {str(error)[:80]}"}
            continue
        results[name] = {"ops": ops, "plain": plain, "full": full}
    return results


def report(ours: dict, reference: dict) -> None:
    header = f"{'function':<12}{'ops':>6}{'plain ms':>10}{'full ms':>10}{'x plain':>9}"
    header += f"{'µs/op':>8}{'all µs/op':>11}"
    if reference:
        header += f"{'ref ops':>9}{'ref ms':>10}{'ref all µs/op':>15}{'speed-up':>10}"
    print(header)
    for name, row in ours.items():
        if "failed" in row:
            print(f"{name:<12} failed: {row['failed']}")
            continue
        per_op = (row["full"] - row["plain"]) / row["ops"] * 1e6
        line = (
            f"{name:<12}{row['ops']:>6}{row['plain'] * 1e3:>10.2f}{row['full'] * 1e3:>10.2f}"
            f"{row['full'] / row['plain']:>9.2f}{per_op:>8.1f}{row['full'] / row['ops'] * 1e6:>11.1f}"
        )
        ref = reference.get(name)
        if ref is not None and "failed" in ref:
            line += f"   reference failed: {ref['failed']}"
        elif ref is not None:
            speed_up = (ref["full"] / ref["ops"]) / (row["full"] / row["ops"])
            line += f"{ref['ops']:>9}{ref['full'] * 1e3:>10.1f}"
            line += f"{ref['full'] / ref['ops'] * 1e6:>15.1f}{speed_up:>10.1f}"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--reference-python", help="a Python with the reference torchlens 2.36.1 and tinygrad"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mode", choices=["ours", "reference", "compare"], default="compare")
    parser.add_argument("--only", help="measure this function alone (the reference runs one per process)")
    parser.add_argument(
        "--reference-timeout", type=float, default=180.0, help="seconds the reference gets per function"
    )
    arguments = parser.parse_args()
    if arguments.mode in ("ours", "reference"):
        print(json.dumps(measure(arguments.repeats, arguments.mode == "reference", arguments.only)))
        return
    reference = {}
    if arguments.reference_python:
        # One process per function with a time limit: the reference can stall or grow without
        # bound on current tinygrad, and that is a result to report, not a hang.
        for name, _, _ in functions():
            answer = measure_in_reference_python(
                arguments.reference_python,
                __file__,
                arguments.repeats,
                ("--only", name),
                arguments.reference_timeout,
            )
            reference[name] = answer.get(name, answer)
    ours = measure(arguments.repeats, False)
    import tinygrad

    version = getattr(tinygrad, "__version__", None)
    if version is None:
        from importlib.metadata import version as installed

        version = installed("tinygrad")
    print(f"tinygrad {version}, default device, median of {arguments.repeats}")
    report(ours, reference)


if __name__ == "__main__":
    main()
