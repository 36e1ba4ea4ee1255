"""The `tlspec` CLI on a large file written by the Python package: `inspect` (reads the
header and the trace body only) and `check` (reads and CRC-checks every payload).

    .venv/bin/python benchmarks/tlspec_cli.py --tlspec target/release/tlspec [--gigabytes 1]

Prints the file's size and op count, the median wall time of `tlspec inspect` over repeated
runs (the compiled component is cached after the first), and `check`'s throughput as it
reports it (warm page cache; cold too when /proc/sys/vm/drop_caches is writable).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import checkout_root  # noqa: F401  (puts the checkout on sys.path for conformance.models)


def write_large_trace(path: str, gigabytes: float) -> int:
    import torch

    import torchlens as tl

    # conformance.models.torch imports torch: lazy like the torch import above.
    from conformance.models.torch import Chain

    steps = int(gigabytes * 1024)
    trace = tl.trace(Chain(steps), torch.randn(256, 1024))
    trace.save(path)
    return len(trace)


def run(tlspec: str, *args: str) -> tuple[float, dict]:
    started = time.perf_counter()
    done = subprocess.run([tlspec, "--json", *args], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"tlspec {' '.join(args)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return elapsed, json.loads(done.stdout)


def drop_page_cache() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tlspec", default="target/release/tlspec")
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=20)
    arguments = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "large.tlspec")
        started = time.perf_counter()
        ops = write_large_trace(path, arguments.gigabytes)
        written = time.perf_counter() - started
        size = os.path.getsize(path)
        print(f"file: {size / 1e9:.3f} GB, {ops} ops (traced and saved in {written:.1f} s)")

        run(arguments.tlspec, "inspect", path)  # fills the compiled-component cache
        times = [run(arguments.tlspec, "inspect", path)[0] for _ in range(arguments.repeats)]
        _, inspected = run(arguments.tlspec, "inspect", path)
        print(
            f"tlspec inspect: median {statistics.median(times) * 1e3:.1f} ms, "
            f"min {min(times) * 1e3:.1f} ms over {arguments.repeats} runs "
            f"({inspected['payloads']} payloads, {inspected['payload_bytes'] / 1e9:.3f} GB not read)"
        )

        checks = [run(arguments.tlspec, "check", path) for _ in range(3)]
        rates = [report["gb_per_second"] for _, report in checks]
        walls = [elapsed for elapsed, _ in checks]
        verified = checks[-1][1]["verified"]
        print(
            f"tlspec check (warm page cache): {statistics.median(rates):.2f} GB/s payload reading "
            f"and CRC-32, whole command median {statistics.median(walls):.2f} s; "
            f"{verified} checksums verified"
        )
        if drop_page_cache():
            elapsed, report = run(arguments.tlspec, "check", path)
            print(
                f"tlspec check (cold page cache): {report['gb_per_second']:.2f} GB/s, "
                f"whole command {elapsed:.2f} s"
            )
        else:
            print("tlspec check (cold page cache): not measured, drop_caches is not writable")


if __name__ == "__main__":
    main()
