"""How much tl.trace costs on TensorFlow (Keras 3) models, per op, against a plain call (the same call with
nothing installed) and (optionally) the reference implementation, in the same run.

    python benchmarks/tf_overhead.py [--reference-python PATH] [--repeats N]

``µs/op`` is the whole capture minus a plain call, divided by the trace's ops; ``all µs/op`` is
the whole capture divided by its ops. With ``--reference-python`` the same models run under that
interpreter's ``torchlens`` (the reference, 2.36.1) and the figures print side by side; each
side counts its own ops, and a model the reference cannot trace prints as failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import tensorflow as tf
from measurement import measure_in_reference_python, timed


def _normal(seed, shape):
    return tf.constant(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.1)


def _built(model, x):
    model(x)
    return model


def functions():
    import keras

    mlp = keras.Sequential(
        [keras.layers.Dense(128, activation="relu") for _ in range(8)] + [keras.layers.Dense(10)]
    )
    cnn = keras.Sequential(
        [
            keras.layers.Conv2D(8, 3, padding="same"),
            keras.layers.BatchNormalization(),
            keras.layers.ReLU(),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(10),
        ]
    )
    inputs = keras.Input((8, 32))
    hidden = inputs
    for _ in range(2):
        hidden = keras.layers.LayerNormalization()(
            hidden + keras.layers.MultiHeadAttention(num_heads=4, key_dim=8)(hidden, hidden)
        )
    attention = keras.Model(inputs, hidden)

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


def measure(repeats: int, reference: bool) -> dict:
    import torchlens as tl

    keywords = {} if reference else {"backend": "tf"}
    results = {}
    for name, fn, x in functions():
        plain = timed(lambda fn=fn, x=x: fn(x), repeats)
        try:
            trace = tl.trace(fn, x, **keywords)
            # the reference's trace counts its ops with len(); ours lists them
            ops = len(trace) if reference else len(trace.ops)
            full = timed(lambda fn=fn, x=x: tl.trace(fn, x, **keywords), repeats)
        except Exception as error:  # the reference refuses or breaks on some models
            results[name] = {"failed": f"{type(error).__name__}: {str(error)[:80]}"}
            continue
        results[name] = {"ops": ops, "plain": plain, "full": full}
    return results


def report(ours: dict, reference: dict) -> None:
    header = f"{'model':<12}{'ops':>6}{'plain ms':>10}{'full ms':>10}{'x plain':>9}"
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
        "--reference-python", help="a Python with the reference torchlens 2.36.1 and TensorFlow"
    )
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
    print(f"tensorflow {tf.__version__}, CPU, median of {arguments.repeats}")
    report(ours, reference)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
