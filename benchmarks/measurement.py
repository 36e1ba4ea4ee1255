"""What the benchmark scripts share: timing a call, and running a script's reference
measurement in another interpreter (the one with the reference implementation installed) and
reading back its JSON, so both sides run in one invocation on the same machine state."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from typing import Callable, Dict, Optional, Sequence

#: How ``timed`` folds its samples: the median, or the minimum (the run least disturbed by other
#: work on a shared machine).
STATISTICS = {"median": statistics.median, "min": min}


def timed(run: Callable[[], object], repeats: int, statistic: str = "median") -> float:
    """Median (or ``statistic``) seconds of ``repeats`` runs after one warm-up (which also
    compiles what a lazy framework compiles on first use)."""
    run()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return STATISTICS[statistic](samples)


def interleaved(
    runs: Dict[str, Callable[[], object]],
    repeats: int,
    block: int = 1,
    prepare: Optional[Callable[[], object]] = None,
) -> Dict[str, float]:
    """Median seconds per call of each run, measured in turns (a block of ``block`` calls of
    each, then again): a machine that slows down for a while slows every run alike, so ratios
    between them hold. Within a block the calls run back to back, so work one call leaves
    behind (a garbage collection its allocations trigger) is paid inside its own block rather
    than by whichever call happens to come next. One warm-up each first. ``prepare``, when
    given, runs untimed before every block (removing the file the previous block wrote, say)."""
    for run in runs.values():
        run()
    samples: Dict[str, list] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            if prepare is not None:
                prepare()
            start = time.perf_counter()
            for _ in range(block):
                run()
            samples[name].append((time.perf_counter() - start) / block)
    return {name: statistics.median(values) for name, values in samples.items()}


def measure_in_reference_python(
    reference_python: str,
    script: str,
    repeats: int,
    extra_arguments: Sequence[str] = (),
    timeout: Optional[float] = None,
) -> dict:
    """Runs ``script --mode reference --repeats N [extra arguments]`` under
    ``reference_python``; the script's last line of output is its JSON measurement. With a
    ``timeout``, a run that does not finish in time is answered ``{"failed": ...}``."""
    command = [reference_python, script, "--mode", "reference", "--repeats", str(repeats), *extra_arguments]
    # A PYTHONPATH that points at this checkout would make the reference import our package.
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, check=True, timeout=timeout, env=environment
        )
    except subprocess.TimeoutExpired:
        return {"failed": f"did not finish in {timeout:.0f} s"}
    return json.loads(completed.stdout.strip().splitlines()[-1])
