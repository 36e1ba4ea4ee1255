"""The two hosts of the core side by side: the pyo3 extension (``native``) and the ``wasmtime``
package from PyPI (``wasmtime-py``, the py3-none-any wheel's host), on the models of
torch_overhead.py, in one invocation.

    python benchmarks/host_comparison.py [--repeats N]

Per model and host: the per-op cost of ``tl.trace`` above the plain forward, and save and load
throughput of the trace's ``.tlspec`` (file bytes per second). Then the bulk-bytes path alone:
a large trace body out of the core (``body``) and back in (``from-body``). Each host runs in
its own interpreter (``TORCHLENS_HOST``), the host being fixed per process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HOSTS = ("native", "wasmtime-py")


def measure(repeats: int) -> dict:
    import torch
    from measurement import timed
    from torch_overhead import models

    import torchlens as tl
    from conformance.models.torch import Chain

    torch.set_num_threads(1)
    results = {"host": tl.versions()["host"], "models": {}}
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "trace.tlspec")
        for name, model, x in models():
            with torch.no_grad():
                plain = timed(lambda model=model, x=x: model(x), repeats)
                trace = tl.trace(model, x)
                full = timed(lambda model=model, x=x: tl.trace(model, x), repeats)
            save = timed(lambda trace=trace: trace.save(path), repeats)
            load = timed(lambda: tl.load(path).ops, repeats)
            results["models"][name] = {
                "ops": len(trace),
                "per_op": (full - plain) / len(trace),
                "bytes": os.path.getsize(path),
                "save": save,
                "load": load,
            }

        trace = tl.trace(Chain(10_000), torch.randn(4), save=tl.func("nothing_matches_this"))
        body = trace._native.body()
        from torchlens._core import core

        results["body"] = {
            "ops": len(trace),
            "bytes": len(body),
            "out": timed(lambda: trace._native.body(), repeats),
            "in": timed(lambda: core().trace_from_body(body), repeats),
        }
    return results


def run_under(host: str, repeats: int) -> dict:
    environment = dict(os.environ, TORCHLENS_HOST=host)
    command = [sys.executable, __file__, "--mode", "measure", "--repeats", str(repeats)]
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"the {host} run failed:\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def report(native: dict, pure: dict) -> None:
    print(
        f"{'model':<18}{'ops':>6}{'µs/op native':>14}{'µs/op pure':>12}{'pure/native':>13}"
        f"{'file KB':>9}{'save MB/s n|p':>17}{'load MB/s n|p':>17}"
    )
    for name, row in native["models"].items():
        other = pure["models"][name]
        megabytes = row["bytes"] / 1e6
        print(
            f"{name:<18}{row['ops']:>6}{row['per_op'] * 1e6:>14.1f}{other['per_op'] * 1e6:>12.1f}"
            f"{other['per_op'] / row['per_op']:>13.2f}{row['bytes'] / 1e3:>9.0f}"
            f"{megabytes / row['save']:>8.1f} |{megabytes / other['save']:>7.1f}"
            f"{megabytes / row['load']:>8.1f} |{megabytes / other['load']:>7.1f}"
        )
    body, other = native["body"], pure["body"]
    megabytes = body["bytes"] / 1e6
    print(
        f"\ntrace body of {body['ops']} ops ({megabytes:.2f} MB) through list<u8>: "
        f"out of the core {megabytes / body['out']:.0f} MB/s native, "
        f"{megabytes / other['out']:.1f} MB/s pure; "
        f"into it {megabytes / body['in']:.0f} MB/s native, {megabytes / other['in']:.1f} MB/s pure"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mode", choices=["compare", "measure"], default="compare")
    arguments = parser.parse_args()
    if arguments.mode == "measure":
        print(json.dumps(measure(arguments.repeats)))
        return
    native, pure = (run_under(host, arguments.repeats) for host in HOSTS)
    import torch

    print(
        f"torch {torch.__version__}, 1 thread, median of {arguments.repeats}; "
        f"hosts: {native['host']}, {pure['host']}"
    )
    report(native, pure)


if __name__ == "__main__":
    main()
