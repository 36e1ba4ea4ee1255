"""Soak: many traces and save/load cycles in one process, watching for leaks.

Runs ``--traces`` traces of a small torch model, then ``--cycles`` save/load cycles of one
trace (each loaded trace's payloads read and compared), in one process. After a warm-up, it
samples the resident set size (``VmRSS``), the open file descriptors (``/proc/self/fd``) and the
memory mappings (``/proc/self/maps``) every ``--every`` iterations and reports the growth from
the first sample after warm-up to the last. Exits 1 when any of them grows past its allowance
(RSS: ``--rss-allowance-mib``; descriptors and mappings: no growth beyond a few of noise).

    python benchmarks/soak.py                      # 10,000 traces, 1,000 save/load cycles
    python benchmarks/soak.py --traces 500 --cycles 100   # a quick run
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def mappings() -> int:
    with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
        return sum(1 for _ in maps)


def sample() -> dict:
    gc.collect()
    return {"rss_mib": rss_mib(), "fds": open_fds(), "maps": mappings()}


def phase(name: str, count: int, every: int, warmup: int, step) -> dict:
    """Runs ``step(i)`` ``count`` times; samples after warm-up and every ``every`` steps."""
    samples = []
    started = time.perf_counter()
    for index in range(count):
        step(index)
        if index + 1 == warmup or (index + 1 > warmup and (index + 1 - warmup) % every == 0):
            samples.append({"after": index + 1, **sample()})
    seconds = time.perf_counter() - started
    first, last = samples[0], samples[-1]
    rss = [entry["rss_mib"] for entry in samples]
    return {
        "phase": name,
        "iterations": count,
        "seconds": round(seconds, 2),
        "per_iteration_ms": round(seconds / count * 1e3, 3),
        "rss_after_warmup_mib": round(first["rss_mib"], 1),
        "rss_last_mib": round(last["rss_mib"], 1),
        "rss_growth_mib": round(last["rss_mib"] - first["rss_mib"], 1),
        "rss_min_max_mib": [round(min(rss), 1), round(max(rss), 1)],
        "fds": [first["fds"], last["fds"]],
        "maps": [first["maps"], last["maps"]],
        "samples": samples,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=1_000)
    parser.add_argument("--every", type=int, default=500, help="sample every N iterations")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rss-allowance-mib", type=float, default=20.0)
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()

    import torch

    import torchlens as tl

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 32),
        torch.nn.Tanh(),
        torch.nn.Linear(32, 4),
    ).eval()
    x = torch.randn(4, 16)
    ops = len(tl.trace(model, x).ops)

    def trace_once(_index: int) -> None:
        trace = tl.trace(model, x)
        assert len(trace.ops) == ops

    reports = [phase("trace", args.traces, args.every, min(args.warmup, args.traces), trace_once)]

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "soak.tlspec")
        kept = tl.trace(model, x)
        expected = {op.label: kept[op.label].out.clone() for op in kept.ops if op.saved}

        def save_load(_index: int) -> None:
            kept.save(path)
            loaded = tl.load(path, verify=True)
            for label, value in expected.items():
                assert torch.equal(loaded[label].out, value)
            del loaded

        every = max(1, min(args.every, args.cycles // 10 or 1))
        reports.append(
            phase("save_load", args.cycles, every, min(args.warmup, max(1, args.cycles // 5)), save_load)
        )

    failures = []
    for report in reports:
        if report["rss_growth_mib"] > args.rss_allowance_mib:
            failures.append(f"{report['phase']}: RSS grew {report['rss_growth_mib']} MiB")
        if report["fds"][1] > report["fds"][0] + 2:
            failures.append(f"{report['phase']}: descriptors {report['fds'][0]} -> {report['fds'][1]}")
        if report["maps"][1] > report["maps"][0] + 16:
            failures.append(f"{report['phase']}: mappings {report['maps'][0]} -> {report['maps'][1]}")
    summary = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "model_ops": ops,
        "phases": [{key: value for key, value in report.items() if key != "samples"} for report in reports],
        "failures": failures,
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({**summary, "phases": reports}, out, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
