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

import argparse
import json

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from measurement import measure_in_reference_python, timed


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


def measure(repeats: int, reference: bool) -> dict:
    import torchlens as tl

    results = {}
    for name, fn, x in functions():
        plain = timed(lambda fn=fn, x=x: mx.eval(fn(x)), repeats)
        try:
            trace = tl.trace(fn, x, backend="mlx")
            ops = len(trace.ops) if not reference else len(getattr(trace, "layer_list", None) or trace.ops)
            full = timed(lambda fn=fn, x=x: tl.trace(fn, x, backend="mlx"), repeats)
        except Exception as error:  # the reference refuses or breaks on some models
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
    parser.add_argument("--reference-python", help="a Python with the reference torchlens 2.36.1 and MLX")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mode", choices=["ours", "reference", "compare"], default="compare")
    arguments = parser.parse_args()
    if arguments.mode in ("ours", "reference"):
        print(json.dumps(measure(arguments.repeats, arguments.mode == "reference")))
        return
    reference = {}
    if arguments.reference_python:
        reference = measure_in_reference_python(arguments.reference_python, __file__, arguments.repeats)
    ours = measure(arguments.repeats, False)
    print(f"MLX {mx.__version__}, default device, median of {arguments.repeats}")
    report(ours, reference)


if __name__ == "__main__":
    main()
