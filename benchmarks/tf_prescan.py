"""What the TensorFlow pre-run scan costs (``torchlens.backends.tf.prescan.eager_entry``: the call
traced once in graph mode and its graph scanned for variable writes and random draws), against a
plain call and a whole ``tl.trace``, on the models of ``tf_overhead.py``.

    python benchmarks/tf_prescan.py [--repeats N]

``scan`` is one uncached scan (a fresh verdict cache each time: the graph trace runs the model's
Python once more, in graph mode); ``cached`` is a scan answered from the cache (the same callable
and input signature traced before); ``trace`` is a whole ``tl.trace`` with the verdict cached, as
every call after the first is. Ratios are to a plain call, medians of N.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tensorflow as tf  # noqa: E402
from tf_overhead import functions  # noqa: E402

import torchlens as tl  # noqa: E402
from torchlens.backends.tf import prescan  # noqa: E402


def _median_seconds(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _row(name: str, fn, x, repeats: int) -> str:
    """One model's figures (milliseconds and ratios)."""

    def uncached() -> None:
        prescan._VERDICTS.clear()
        prescan.eager_entry(fn, (x,), {})

    fn(x)
    plain = _median_seconds(lambda: fn(x), repeats)
    scan = _median_seconds(uncached, repeats)
    prescan.eager_entry(fn, (x,), {})
    cached = _median_seconds(lambda: prescan.eager_entry(fn, (x,), {}), repeats)
    trace = _median_seconds(lambda: tl.trace(fn, x, backend="tf"), repeats)
    return (
        f"{name:<12} {plain * 1e3:>10.2f} {scan * 1e3:>10.2f} {scan / plain:>10.1f} "
        f"{cached * 1e3:>10.3f} {trace * 1e3:>10.1f} {scan / trace:>10.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    print(f"tensorflow {tf.__version__}, CPU, median of {repeats}")
    columns = ("plain ms", "scan ms", "scan/plain", "cached ms", "trace ms", "scan/trace")
    print(f"{'model':<12} " + " ".join(f"{column:>10}" for column in columns))
    for name, fn, x in functions():
        print(_row(name, fn, x, repeats))


if __name__ == "__main__":
    main()
