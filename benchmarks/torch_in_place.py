"""What in-place ops cost a torch trace that saves every value: running them out of place and
swapping storage (what a capture does where it is sound) against copying the old value first
(what it does elsewhere), against a plain forward, in turns in one process.

    python benchmarks/torch_in_place.py [--repeats N]

The copy path is forced by making ``Capture._can_swap`` answer False. A third column runs the
in-place ops as written with nothing kept of the value they overwrite: the trace's values are
then wrong, so it is only the floor the other two are measured against. Torch runs on one thread,
as in the other benchmark scripts.
"""

from __future__ import annotations

import argparse
from typing import Callable, Dict

import torch
from measurement import interleaved
from torch_overhead import models as overhead_models

#: The workloads of ``torch_overhead.py`` this benchmark runs (ResNet blocks write in place).
WORKLOADS = ("resnet18", "resnet18_b8")


def traced_with(path: str, model: torch.nn.Module, x: torch.Tensor) -> Callable[[], object]:
    """A trace of ``model`` whose in-place ops take ``path``: ``swap`` (what a capture chooses),
    ``copy``, or ``unkept`` (the op runs as written, the old value is lost)."""
    import torchlens as tl
    from torchlens.backends.torch.capture import Capture

    can_swap, run_in_place = Capture._can_swap, Capture.run_in_place

    def as_written(capture, func, name, args, kwargs):
        return func(*args, **kwargs)

    def run() -> object:
        if path == "copy":
            Capture._can_swap = lambda capture, target, args, kwargs: False
        elif path == "unkept":
            Capture.run_in_place = as_written
        try:
            return tl.trace(model, x)
        finally:
            Capture._can_swap, Capture.run_in_place = can_swap, run_in_place

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    options = parser.parse_args()
    torch.set_num_threads(1)
    print("| model | plain ms | copy × plain | swap × plain | unkept (floor) × plain |")
    print("|---|---|---|---|---|")
    for name, model, x in overhead_models():
        if name not in WORKLOADS:
            continue
        with torch.no_grad():
            runs: Dict[str, Callable[[], object]] = {
                "plain": lambda model=model, x=x: model(x),
                "copy": traced_with("copy", model, x),
                "swap": traced_with("swap", model, x),
                "unkept": traced_with("unkept", model, x),
            }
            times = interleaved(runs, options.repeats)
        plain = times["plain"]
        print(
            f"| {name} | {plain * 1e3:.1f} | {times['copy'] / plain:.3f} | {times['swap'] / plain:.3f} "
            f"| {times['unkept'] / plain:.3f} |"
        )


if __name__ == "__main__":
    main()
