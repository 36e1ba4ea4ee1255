"""What ``tl.record`` costs on repeat calls, against a plain forward and ``tl.trace`` with the
same ``save=``, and (optionally) the reference implementation's ``record`` and ``trace``, in
the same run.

    python benchmarks/torch_record.py [--reference-python PATH] [--repeats N] [--save TEXT]

torchvision's resnet18, batch 1, 224x224, eval, one thread; one selected layer (``--save``,
default ``tl.module("layer3")``: the output of the third stage). Each side's cases run in one
process, interleaved round after round (plain, record, trace, ...), so load on a shared machine
lands on all of them alike; figures are medians. Each call runs on the same input; the first
call of ``tl.record`` (which traces and learns the plan) is the warm-up and is not timed.

Targets: ``tl.record`` at most 1.05x the plain forward, and its overhead above the plain
forward at most a third of ``tl.trace``'s with the same ``save=``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Callable, Dict, List

import torch
from measurement import measure_in_reference_python

DEFAULT_SAVE = 'tl.module("layer3")'


def resnet18() -> tuple:
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 224, 224)


def interleaved(cases: Dict[str, Callable[[], object]], repeats: int) -> Dict[str, float]:
    """Median seconds of each case over ``repeats`` rounds that run every case once, after one
    warm-up round."""
    samples: Dict[str, List[float]] = {name: [] for name in cases}
    for call in cases.values():
        call()
    for _ in range(repeats):
        for name, call in cases.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(found) for name, found in samples.items()}


def measure(tl, save_text: str, repeats: int, reference: bool) -> Dict[str, object]:
    """The cases under one ``torchlens`` (ours, or the reference in its own interpreter)."""
    model, x = resnet18()
    save = eval(save_text, {"tl": tl})
    with torch.no_grad():
        recording = tl.record(model, x, save=save)
        cases = {
            "plain": lambda: model(x),
            "record": lambda: tl.record(model, x, save=save),
            "trace": lambda: tl.trace(model, x, save=save),
        }
        seconds = interleaved(cases, repeats)
    if reference:
        labels = list(recording.by_label)
    else:
        labels = recording.labels
        # The figures are for the plan path: make sure that is the path that was timed.
        assert tl.record(model, x, save=save).from_plan, "the repeat call did not use the plan"
    return {"seconds": seconds, "labels": labels}


def report(ours: dict, reference: dict, save_text: str, repeats: int) -> None:
    print(
        f"resnet18 batch 1 eval, torch {torch.__version__}, 1 thread, save={save_text}, "
        f"median of {repeats} interleaved rounds"
    )
    for side, figures in (("ours", ours), ("reference", reference)):
        if not figures:
            continue
        if "failed" in figures:
            print(f"  {side}: {figures['failed']}")
            continue
        seconds = figures["seconds"]
        plain, record, trace = seconds["plain"], seconds["record"], seconds["trace"]
        record_overhead, trace_overhead = record - plain, trace - plain
        share = record_overhead / trace_overhead if trace_overhead > 0 else float("nan")
        print(
            f"  {side:<10} plain {plain * 1e3:7.2f} ms   record {record * 1e3:7.2f} ms "
            f"({record / plain:5.3f}x plain)   trace {trace * 1e3:7.2f} ms ({trace / plain:5.2f}x plain)   "
            f"record overhead / trace overhead {share:6.3f}   recorded {figures['labels']}"
        )
    if ours and reference and "failed" not in reference:
        ratio = ours["seconds"]["record"] / reference["seconds"]["record"]
        print(f"  our record / reference record: {ratio:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-python", help="a Python with the reference torchlens 2.36.1")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--save", default=DEFAULT_SAVE, help="the selector, as Python over tl")
    parser.add_argument("--mode", choices=["ours", "reference", "compare"], default="compare")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    import torchlens as tl

    if arguments.mode in ("ours", "reference"):
        print(json.dumps(measure(tl, arguments.save, arguments.repeats, arguments.mode == "reference")))
        return
    reference = {}
    if arguments.reference_python:
        reference = measure_in_reference_python(
            arguments.reference_python, __file__, arguments.repeats, ["--save", arguments.save], timeout=1800
        )
    ours = measure(tl, arguments.save, arguments.repeats, reference=False)
    report(ours, reference, arguments.save, arguments.repeats)


if __name__ == "__main__":
    main()
