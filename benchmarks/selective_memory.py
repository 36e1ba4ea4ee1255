"""Peak memory and time of a narrow ``save=`` against a full trace and a plain forward, on
torchvision's resnet18 (batch 8, 224x224) and a small GPT-style transformer, eval mode under
``torch.no_grad()``.

    python benchmarks/selective_memory.py [--repeats N] [--json PATH]

Each case runs in a fresh interpreter: the model is built and warmed (one plain forward, one
tiny trace so the core component is loaded), the process's peak resident memory (VmHWM) is
reset through ``/proc/self/clear_refs``, one plain forward measures the plain peak, the peak is
reset again and the traced call measures its own. "Above plain" is the traced peak minus the
plain peak. "Saved" is the bytes of the values the trace kept. glibc's malloc is pinned to a
fixed mmap threshold (``MALLOC_MMAP_THRESHOLD_``) in every case, plain ones included, so freed
activations go back to the system instead of staying in the heap and hiding what was released.
Times are medians of ``--repeats`` rounds of one interleaved run (plain, full and every narrow
case in turn, in one process), as ratios to the plain forward.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CASE = r"""
import json, statistics, sys, time
import checkout_root
import torch, torch.nn as nn
import torchlens as tl
from conformance.models.torch import Gpt

def peak():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

def reset_peak():
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")

model_name, save_text, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.manual_seed(0)
torch.set_num_threads(1)
if model_name == "resnet18":
    import torchvision
    model, x = torchvision.models.resnet18().eval(), torch.randn(8, 3, 224, 224)
else:
    model, x = Gpt().eval(), torch.randint(0, 1000, (8, 128))
if save_text == "interleaved":
    # Every case timed in one process, round after round, so a load change on a shared
    # machine lands on all of them alike.
    texts = json.loads(sys.argv[4])
    calls = [
        (lambda: model(x)) if text == "plain"
        else (lambda save=(None if text == "full" else eval(text, {"tl": tl})): tl.trace(model, x, save=save))
        for text in texts
    ]
    samples = [[] for _ in texts]
    with torch.no_grad():
        for call in calls:
            call()
        for _ in range(repeats):
            for index, call in enumerate(calls):
                start = time.perf_counter()
                call()
                samples[index].append(time.perf_counter() - start)
    print(json.dumps({text: statistics.median(found) for text, found in zip(texts, samples)}))
    sys.exit(0)
save = None if save_text in ("full", "plain") else eval(save_text, {"tl": tl})
with torch.no_grad():
    model(x)
    tl.trace(nn.Linear(2, 2), torch.ones(1, 2), save=tl.func("linear"))
    reset_peak()
    base = peak()
    model(x)
    plain_peak = peak()
    if save_text == "plain":
        traced_peak, saved_ops, saved_bytes = plain_peak, 0, 0
    else:
        reset_peak()
        trace = tl.trace(model, x, save=save)
        traced_peak = peak()
        saved = [op.out for op in trace.saved_ops]
        saved_ops, saved_bytes = len(saved), sum(value.nbytes for value in saved)
        del trace, saved
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        if save_text == "plain":
            model(x)
        else:
            tl.trace(model, x, save=save)
        times.append(time.perf_counter() - start)
print(json.dumps({
    "above_plain": traced_peak - plain_peak,
    "plain_transient": plain_peak - base,
    "saved_ops": saved_ops,
    "saved_bytes": saved_bytes,
    "seconds": statistics.median(times),
}))
"""

#: Per model: the one-layer selections measured besides a full trace.
CASES = {
    "resnet18": [
        ("full", "full"),
        ("module output layer3", 'tl.module("layer3")'),
        ("one label (layer3's first conv)", 'tl.label("conv2d_11_52")'),
        ("func adaptive_avg_pool2d", 'tl.func("adaptive_avg_pool2d")'),
    ],
    "gpt": [
        ("full", "full"),
        ("module output blocks.2", 'tl.module("blocks.2")'),
        ("func softmax in blocks.1", 'tl.func("softmax") & tl.in_module("blocks.1")'),
    ],
}


def run_case(model: str, save: str, repeats: int, *extra: str) -> dict:
    environment = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", OMP_NUM_THREADS="1")
    command = [sys.executable, "-c", CASE, model, save, str(repeats), *extra]
    # Run from this folder: the case imports checkout_root from it (``-c`` puts the cwd on sys.path).
    finished = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=environment,
        cwd=os.path.dirname(os.path.abspath(__file__)),
    )
    if finished.returncode != 0:
        raise SystemExit(f"{model} with save={save} failed:\n{finished.stderr}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the figures to this file")
    arguments = parser.parse_args()
    results = {}
    mib = 2**20
    for model, cases in CASES.items():
        plain = run_case(model, "plain", arguments.repeats)
        # Times come from one interleaved run of every case (memory from a process per case).
        texts = ["plain"] + [save for _, save in cases]
        seconds = run_case(model, "interleaved", arguments.repeats, json.dumps(texts))
        plain["seconds"] = seconds["plain"]
        results[model] = {"plain": plain}
        print(
            f"{model}: plain forward {plain['seconds'] * 1e3:.0f} ms,"
            f" transient {plain['plain_transient'] / mib:.1f} MiB"
        )
        print(f"  {'save=':<36} {'above plain':>12} {'saved':>10} {'ops':>5} {'time':>9} {'x plain':>8}")
        for name, save in cases:
            figures = run_case(model, save, 1)
            figures["seconds"] = seconds[save]
            results[model][name] = dict(figures, save=save)
            print(
                f"  {name:<36} {figures['above_plain'] / mib:>8.1f} MiB"
                f" {figures['saved_bytes'] / mib:>6.1f} MiB"
                f" {figures['saved_ops']:>5} {figures['seconds'] * 1e3:>6.0f} ms"
                f" {figures['seconds'] / plain['seconds']:>7.2f}x"
            )
    if arguments.json:
        with open(arguments.json, "w") as file:
            json.dump(results, file, indent=2)


if __name__ == "__main__":
    main()
