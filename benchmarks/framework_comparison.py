"""The comparison every preview-framework benchmark makes (JAX, MLX, Paddle, tinygrad): each
function of a small battery runs plain and under ``tl.trace``, in this interpreter and, in the
same invocation, under the reference's interpreter (one function per process with a time limit,
so a reference that stalls is a reported result, not a hang); the figures print side by side
per op. A script supplies its battery and how to run one function plain and traced."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable, List, Optional, Tuple

from measurement import STATISTICS, measure_in_reference_python, timed

#: (name, function, inputs) of one battery entry.
Entry = Tuple[str, Any, Any]


class Battery:
    """What one framework's benchmark supplies."""

    def __init__(
        self,
        entries: Callable[[], List[Entry]],
        plain: Callable[[Any, Any], Any],
        traced: Callable[[Any, Any, Any, bool], Any],
        describe: Callable[[int], str],
    ) -> None:
        #: Builds the battery (in the measuring process: models draw their weights there).
        self.entries = entries
        #: Runs one function plain, to a realized result.
        self.plain = plain
        #: ``traced(tl, fn, inputs, reference)`` runs one ``tl.trace`` and returns the trace.
        self.traced = traced
        #: The framework line of the report, given the repeats.
        self.describe = describe


def op_count(trace: Any, reference: bool) -> int:
    """Ops a trace recorded: ours lists them; the reference's trace counts them with len()."""
    return len(trace) if reference else len(trace.ops)


def measure(
    battery: Battery, repeats: int, reference: bool, only: Optional[str] = None, statistic: str = "median"
) -> dict:
    import torchlens as tl

    # The reference is slow per op: fewer timed runs keep a comparison within minutes.
    runs = max(1, repeats // 3) if reference else repeats
    results = {}
    for name, fn, inputs in battery.entries():
        if only is not None and name != only:
            continue
        plain = timed(lambda fn=fn, inputs=inputs: battery.plain(fn, inputs), repeats, statistic)
        try:
            # The first capture of a function pays what a framework traces and compiles once
            # (``first``); ``full`` is the median of the captures after it.
            start = time.perf_counter()
            ops = op_count(battery.traced(tl, fn, inputs, reference), reference)
            first = time.perf_counter() - start
            full = timed(
                lambda fn=fn, inputs=inputs: battery.traced(tl, fn, inputs, reference), runs, statistic
            )
        except Exception as error:  # the reference refuses or breaks on some functions
            results[name] = {"failed": f"{type(error).__name__}: {str(error)[:80]}"}
            continue
        results[name] = {"ops": ops, "plain": plain, "full": full, "first": first}
    return results


def _ms(row: dict, key: str) -> str:
    """A duration in ms, or a dash where a row (an older run's) lacks it."""
    return f"{row[key] * 1e3:.2f}" if key in row else "-"


def report(ours: dict, reference: dict) -> None:
    header = f"{'function':<14}{'ops':>6}{'plain ms':>10}{'first ms':>10}{'full ms':>10}{'x plain':>9}"
    header += f"{'µs/op':>8}{'all µs/op':>11}"
    if reference:
        header += f"{'ref ops':>9}{'ref first':>11}{'ref ms':>10}{'ref all µs/op':>15}{'speed-up':>10}"
    print(header)
    for name, row in ours.items():
        if "failed" in row:
            print(f"{name:<14} failed: {row['failed']}")
            continue
        per_op = (row["full"] - row["plain"]) / row["ops"] * 1e6
        line = (
            f"{name:<14}{row['ops']:>6}{row['plain'] * 1e3:>10.2f}{_ms(row, 'first'):>10}"
            f"{row['full'] * 1e3:>10.2f}"
            f"{row['full'] / row['plain']:>9.2f}{per_op:>8.1f}{row['full'] / row['ops'] * 1e6:>11.1f}"
        )
        ref = reference.get(name)
        if ref is not None and "failed" in ref:
            line += f"   reference failed: {ref['failed']}"
        elif ref is not None:
            speed_up = (ref["full"] / ref["ops"]) / (row["full"] / row["ops"])
            line += f"{ref['ops']:>9}{_ms(ref, 'first'):>11}{ref['full'] * 1e3:>10.1f}"
            line += f"{ref['full'] / ref['ops'] * 1e6:>15.1f}{speed_up:>10.1f}"
        print(line)


def main(battery: Battery, description: str, script: str, default_repeats: int = 5) -> None:
    """The command line every framework script shares (``--mode reference`` is how the
    comparison calls the script under the reference's interpreter)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--reference-python", help="a Python with the reference torchlens 2.36.1 and the framework"
    )
    parser.add_argument("--repeats", type=int, default=default_repeats)
    parser.add_argument("--mode", choices=["ours", "reference", "compare"], default="compare")
    parser.add_argument("--only", help="measure this function alone (the reference runs one per process)")
    parser.add_argument(
        "--reference-timeout", type=float, default=180.0, help="seconds per reference function"
    )
    parser.add_argument(
        "--statistic",
        choices=sorted(STATISTICS),
        default="median",
        help="how the timed runs fold (min: the least disturbed run, on a shared machine)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print ours and the reference's as one JSON object"
    )
    arguments = parser.parse_args()
    if arguments.mode in ("ours", "reference"):
        is_reference = arguments.mode == "reference"
        print(
            json.dumps(measure(battery, arguments.repeats, is_reference, arguments.only, arguments.statistic))
        )
        return
    reference = {}
    if arguments.reference_python:
        for name, _, _ in battery.entries():
            answer = measure_in_reference_python(
                arguments.reference_python,
                script,
                arguments.repeats,
                ("--only", name, "--statistic", arguments.statistic),
                arguments.reference_timeout,
            )
            reference[name] = answer.get(name, answer)
    ours = measure(battery, arguments.repeats, False, statistic=arguments.statistic)
    if arguments.json:
        print(
            json.dumps(
                {"framework": battery.describe(arguments.repeats), "ours": ours, "reference": reference}
            )
        )
        return
    print(
        battery.describe(arguments.repeats)
        + ("" if arguments.statistic == "median" else f" ({arguments.statistic})")
    )
    report(ours, reference)
