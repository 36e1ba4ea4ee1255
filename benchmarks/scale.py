"""A 100,000-op trace end to end: capture, save, load and the CLI's `inspect`, each at several
sizes in a fresh process, so that memory and time can be read as per-op figures and their
growth as a log-log slope (1.0 is linear).

    python benchmarks/scale.py --tlspec target/release/tlspec [--ops 10000 30000 100000] [--json]

The model is a long loop of small ops (``relu`` then ``+ 1`` on four floats). Memory is the
process's resident set growth while the trace is held, with ``save=False`` (the trace's own
metadata: the core's records of ops, labels and edges, and the replay records the adapter
keeps) and with every value saved (metadata and payloads). The file is written from the
``save=False`` trace, so its size per op is metadata only.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from typing import List

import checkout_root  # noqa: F401  (puts the checkout on sys.path for conformance.models)


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def loop_model(steps: int):
    """``steps`` times ``relu`` then ``+ 1``: two ops a step (torch is imported here, so the parent
    process that only collects results never loads it)."""
    # conformance.models.torch imports torch: lazy for the reason above.
    from conformance.models.torch import Chain

    return Chain(2 * steps)


def measure_one(ops: int, tlspec: str) -> dict:
    """One size, in this process (the caller runs each size in a fresh one)."""
    import torch

    import torchlens as tl

    torch.set_num_threads(1)
    x = torch.randn(4)
    with torch.no_grad():
        tl.trace(loop_model(10), x)  # the core's instance and every import are paid here
        gc.collect()
        model = loop_model(ops // 2)
        before = resident_bytes()
        start = time.perf_counter()
        trace = tl.trace(model, x, save=False)
        capture_seconds = time.perf_counter() - start
        gc.collect()
        metadata_bytes = resident_bytes() - before
        recorded = len(trace)
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "scale.tlspec")
            start = time.perf_counter()
            trace.save(path)
            save_seconds = time.perf_counter() - start
            file_bytes = os.path.getsize(path)
            del trace
            gc.collect()
            start = time.perf_counter()
            loaded = tl.load(path)
            load_seconds = time.perf_counter() - start
            assert len(loaded) == recorded
            del loaded
            # The first run compiles the component into the CLI's cache; the second is what opening
            # a file costs.
            subprocess.run([tlspec, "--json", "inspect", path], capture_output=True, check=True)
            start = time.perf_counter()
            subprocess.run([tlspec, "--json", "inspect", path], capture_output=True, check=True)
            cli_seconds = time.perf_counter() - start
    return {
        "ops": recorded,
        "capture_s": capture_seconds,
        "save_s": save_seconds,
        "load_s": load_seconds,
        "cli_inspect_s": cli_seconds,
        "metadata_bytes_per_op": metadata_bytes / recorded,
        "file_bytes_per_op": file_bytes / recorded,
    }


def measure_saved_all(ops: int) -> dict:
    """Memory of a trace that saves every value (metadata and payloads), in a process of its own
    (the core's memory, once grown, is reused by a later trace and would hide it)."""
    import torch

    import torchlens as tl

    torch.set_num_threads(1)
    x = torch.randn(4)
    with torch.no_grad():
        tl.trace(loop_model(10), x)
        gc.collect()
        model = loop_model(ops // 2)
        before = resident_bytes()
        trace = tl.trace(model, x)
        gc.collect()
        return {"saved_all_bytes_per_op": (resident_bytes() - before) / len(trace)}


def slope(rows: List[dict], key: str) -> float:
    """Least-squares slope of log(key) against log(ops)."""
    xs = [math.log(row["ops"]) for row in rows]
    ys = [math.log(max(row[key], 1e-9)) for row in rows]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread


def measure(sizes: List[int], tlspec: str) -> dict:
    rows = []
    for ops in sizes:
        done = subprocess.run(
            [sys.executable, __file__, "--one", str(ops), "--tlspec", tlspec],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(done.stdout.strip().splitlines()[-1])
        done = subprocess.run(
            [sys.executable, __file__, "--one-saved-all", str(ops)],
            capture_output=True,
            text=True,
            check=True,
        )
        row.update(json.loads(done.stdout.strip().splitlines()[-1]))
        rows.append(row)
    # A slope needs two sizes at least (``--ops 100000`` alone reports none).
    keys = ("capture_s", "save_s", "load_s", "cli_inspect_s") if len(set(sizes)) > 1 else ()
    slopes = {key: slope(rows, key) for key in keys}
    return {"rows": rows, "slopes": slopes}


def report(result: dict) -> None:
    print(
        f"{'ops':>8}{'capture s':>11}{'µs/op':>8}{'save s':>9}{'load s':>9}{'cli s':>8}"
        f"{'meta B/op':>11}{'all B/op':>10}{'file B/op':>11}"
    )
    for row in result["rows"]:
        print(
            f"{row['ops']:>8}{row['capture_s']:>11.2f}{row['capture_s'] / row['ops'] * 1e6:>8.1f}"
            f"{row['save_s']:>9.2f}{row['load_s']:>9.2f}{row['cli_inspect_s']:>8.2f}"
            f"{row['metadata_bytes_per_op']:>11.0f}{row['saved_all_bytes_per_op']:>10.0f}"
            f"{row['file_bytes_per_op']:>11.0f}"
        )
    if result["slopes"]:
        slopes = ", ".join(f"{key} {value:.2f}" for key, value in result["slopes"].items())
        print(f"log-log slope (1.0 = linear): {slopes}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tlspec", default="target/release/tlspec", help="the CLI binary")
    parser.add_argument("--ops", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--one-saved-all", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    if arguments.one_saved_all is not None:
        print(json.dumps(measure_saved_all(arguments.one_saved_all)))
        return
    if arguments.one is not None:
        print(json.dumps(measure_one(arguments.one, arguments.tlspec)))
        return
    result = measure(arguments.ops, os.path.abspath(arguments.tlspec))
    if arguments.json:
        print(json.dumps(result))
    else:
        report(result)


if __name__ == "__main__":
    main()
