"""Peak memory and time of a streamed trace (``streaming=StreamingOptions(path=...)``) against
a full in-memory trace (alone, and followed by ``trace.save``) and a plain forward, on
torchvision's resnet18 (224x224, eval mode, ``torch.no_grad()``), at a few batch sizes.

    python benchmarks/streaming_memory.py [--batches 8 32] [--json PATH]

Each case runs in a fresh interpreter, so each peak is that process's own. "Process peak" is
the interpreter's whole peak resident memory (VmHWM: torch, the model and the capture), what a
user sees; "above warm" is that peak minus the resident memory after the model was built and
warmed (one plain forward, one tiny trace that loads the core component). The streamed case
times the whole call, the file's final assembly and fsync included. glibc's malloc is pinned to
a fixed mmap threshold (``MALLOC_MMAP_THRESHOLD_``) in every case, so freed activations go back
to the system instead of staying in the heap.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CASE = r"""
import json, os, sys, time
import torch, torchvision
import torchlens as tl

def status(key):
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(key):
                return int(line.split()[1]) * 1024

mode, batch, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
torch.set_num_threads(1)
model, x = torchvision.models.resnet18().eval(), torch.randn(batch, 3, 224, 224)
with torch.no_grad():
    model(x)
    tl.trace(torch.nn.Linear(2, 2), torch.ones(1, 2))
    warm = status("VmRSS:")
    start = time.perf_counter()
    if mode == "plain":
        model(x)
        saved = 0
    elif mode in ("full", "full+save"):
        trace = tl.trace(model, x)
        if mode == "full+save":
            trace.save(os.path.join(folder, "saved.tlspec"))
        saved = sum(op.out.nbytes for op in trace.saved_ops)
    else:
        path = os.path.join(folder, "streamed.tlspec")
        trace = tl.trace(model, x, streaming=tl.StreamingOptions(path=path))
        saved = sum(op.out.nbytes for op in trace.saved_ops)
    seconds = time.perf_counter() - start
print(json.dumps({"peak": status("VmHWM:"), "warm": warm, "saved": saved, "seconds": seconds}))
"""

MODES = ("plain", "full", "full+save", "streaming")


def run_case(mode: str, batch: int) -> dict:
    environment = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-c", CASE, mode, str(batch), folder]
        finished = subprocess.run(command, capture_output=True, text=True, env=environment)
    if finished.returncode != 0:
        raise SystemExit(f"{mode} at batch {batch} failed:\n{finished.stderr}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--json", help="also write the figures to this file")
    arguments = parser.parse_args()
    mib = 2**20
    results = {}
    for batch in arguments.batches:
        figures = {mode: run_case(mode, batch) for mode in MODES}
        results[f"resnet18 batch {batch}"] = figures
        full, streamed = figures["full"], figures["streaming"]
        print(f"resnet18 batch {batch} (saved values {full['saved'] / mib:.0f} MiB)")
        print(f"  {'':<10} {'process peak':>13} {'above warm':>11} {'time':>9}")
        for mode in MODES:
            case = figures[mode]
            print(
                f"  {mode:<10} {case['peak'] / mib:>9.0f} MiB {(case['peak'] - case['warm']) / mib:>7.0f} MiB"
                f" {case['seconds'] * 1e3:>6.0f} ms"
            )
        above_warm = (streamed["peak"] - streamed["warm"]) / max(full["peak"] - full["warm"], 1)
        print(
            f"  streamed peak / full peak: {streamed['peak'] / full['peak']:.2f} (process),"
            f" {above_warm:.2f} (above warm);"
            f" time {streamed['seconds'] / figures['full+save']['seconds']:.2f}x a full trace and its save"
        )
    if arguments.json:
        with open(arguments.json, "w") as file:
            json.dump(results, file, indent=2)


if __name__ == "__main__":
    main()
