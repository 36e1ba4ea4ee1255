"""What ``tl.record`` costs on repeat calls, against a plain forward and ``tl.trace`` with the
same ``save=``, and (optionally) the reference implementation's ``record`` and ``trace``, in
the same run.

    python benchmarks/torch_record.py [--reference-python PATH] [--repeats N] [--save TEXT]
                                      [--clock wall|cpu]

torchvision's resnet18, batch 1, 224x224, eval, one thread; one selected layer (``--save``,
default ``tl.module("layer3")``: the output of the third stage). Each side's cases run in one
process, interleaved round after round (plain, record, trace, ...), so load on a shared machine
lands on all of them alike (every other round in reverse order); times are medians, ratios
are medians of the ratios within each round. Each call runs on the same input; the first call
of ``tl.record`` (which traces and learns the plan) is the warm-up and is not timed. The two
sides run one after the other, so they are compared by their ratios to their own plain
forward, not by milliseconds.

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


def interleaved(
    cases: Dict[str, Callable[[], object]], repeats: int, clock: Callable[[], float] = time.perf_counter
) -> Dict[str, List[float]]:
    """Seconds of each case in ``repeats`` rounds that run every case once, after one warm-up
    round; every other round runs them in reverse order, so a drift in load within a round
    does not favour the case that runs first."""
    samples: Dict[str, List[float]] = {name: [] for name in cases}
    for call in cases.values():
        call()
    order = list(cases.items())
    for round_number in range(repeats):
        for name, call in order if round_number % 2 == 0 else reversed(order):
            start = clock()
            call()
            samples[name].append(clock() - start)
    return samples


def figures(samples: Dict[str, List[float]]) -> Dict[str, float]:
    """Medians of each case, and medians of the per-round ratios (paired within a round, so a
    load change between rounds cancels): record / plain, trace / plain, and record's overhead
    above plain as a share of trace's."""
    plain, record, trace = samples["plain"], samples["record"], samples["trace"]
    rounds = list(zip(plain, record, trace))
    return {
        **{name: statistics.median(found) for name, found in samples.items()},
        "record_x_plain": statistics.median(r / p for p, r, _ in rounds),
        "trace_x_plain": statistics.median(t / p for p, _, t in rounds),
        "overhead_share": statistics.median((r - p) / (t - p) for p, r, t in rounds if t > p),
    }


#: ``--clock``: wall time, or the CPU time of the calling thread (with one torch thread the
#: forward runs there), which time spent waiting for a core on a loaded machine does not count.
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def measure(tl, save_text: str, repeats: int, reference: bool, clock: str = "wall") -> Dict[str, object]:
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
        seconds = figures(interleaved(cases, repeats, CLOCKS[clock]))
        if reference:
            labels = list(recording.by_label)
        else:
            labels = recording.labels
            # The figures are for the plan path: make sure that is the path that was timed.
            assert tl.record(model, x, save=save).from_plan, "the repeat call did not use the plan"
    return {"seconds": seconds, "labels": labels}


def report(ours: dict, reference: dict, save_text: str, repeats: int, clock: str) -> None:
    print(
        f"resnet18 batch 1 eval, torch {torch.__version__}, 1 thread, save={save_text}, "
        f"{clock} time, median of {repeats} interleaved rounds"
    )
    for side, measured in (("ours", ours), ("reference", reference)):
        if not measured:
            continue
        if "failed" in measured:
            print(f"  {side}: {measured['failed']}")
            continue
        seconds = measured["seconds"]
        print(
            f"  {side:<10} plain {seconds['plain'] * 1e3:7.2f} ms   record {seconds['record'] * 1e3:7.2f} ms "
            f"({seconds['record_x_plain']:5.3f}x plain)   trace {seconds['trace'] * 1e3:7.2f} ms "
            f"({seconds['trace_x_plain']:5.2f}x plain)   record overhead / trace overhead "
            f"{seconds['overhead_share']:6.3f}   recorded {measured['labels']}"
        )
    if ours and reference and "failed" not in reference:
        ours_x, reference_x = ours["seconds"]["record_x_plain"], reference["seconds"]["record_x_plain"]
        print(f"  record x plain: ours {ours_x:.3f}, reference {reference_x:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference-python", help="a Python with the reference torchlens 2.36.1")
    parser.add_argument("--repeats", type=int, default=41)
    parser.add_argument("--save", default=DEFAULT_SAVE, help="the selector, as Python over tl")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--mode", choices=["ours", "reference", "compare"], default="compare")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    import torchlens as tl

    if arguments.mode in ("ours", "reference"):
        reference = arguments.mode == "reference"
        print(json.dumps(measure(tl, arguments.save, arguments.repeats, reference, arguments.clock)))
        return
    reference = {}
    if arguments.reference_python:
        reference = measure_in_reference_python(
            arguments.reference_python,
            __file__,
            arguments.repeats,
            ["--save", arguments.save, "--clock", arguments.clock],
            timeout=1800,
        )
    ours = measure(tl, arguments.save, arguments.repeats, False, arguments.clock)
    report(ours, reference, arguments.save, arguments.repeats, arguments.clock)


if __name__ == "__main__":
    main()
