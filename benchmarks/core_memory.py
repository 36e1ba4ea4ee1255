"""What a long trace costs the core per op in wasm32 linear memory, with no Python capture
around it: builds ``core-wasm/examples/memory_probe.rs`` for ``wasm32-unknown-unknown`` and runs
it under the ``wasmtime`` package at several sizes, each in a fresh instance.

    python benchmarks/core_memory.py [--steps 5000 15000 50000] [--json]

The probe builds the trace of ``benchmarks/scale.py``'s loop (two ops a step) from postcard
batches as a capture sends them and reports how far linear memory grew: the high-water mark of
the core's allocator, which the component keeps resident (linear memory never shrinks). The
whole-process figure (``scale.py``) adds the Python side and the host; this one isolates the
core's data layout, so a change to it can be measured in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = "wasm32-unknown-unknown"


def build() -> str:
    """Builds the probe (adding the rustup target if missing); returns the module's path."""
    installed = subprocess.run(
        ["rustup", "target", "list", "--installed"], capture_output=True, text=True, check=True
    ).stdout.split()
    if TARGET not in installed:
        subprocess.run(["rustup", "target", "add", TARGET], check=True)
    subprocess.run(
        ["cargo", "build", "--quiet", "--release", "-p", "torchlens-core"]
        + ["--example", "memory_probe", "--target", TARGET],
        cwd=ROOT,
        check=True,
    )
    target_dir = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target_dir, TARGET, "release", "examples", "memory_probe.wasm")


def measure(module_path: str, steps: int) -> dict:
    """One size, in a fresh instance."""
    import wasmtime

    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    module = wasmtime.Module.from_file(engine, module_path)
    exports = wasmtime.Instance(store, module, []).exports(store)
    grown = exports["trace_loop"](store, steps)
    ops = exports["ops"](store)
    sizes = exports["record_sizes"](store)
    return {
        "steps": steps,
        "ops": ops,
        "linear_memory_bytes_per_op": grown / ops,
        "tables_bytes_per_op": exports["table_bytes"](store) / ops,
        "op_bytes": sizes >> 32,
        "layer_bytes": sizes & 0xFFFFFFFF,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, nargs="+", default=[5_000, 15_000, 50_000])
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    module_path = build()
    rows: List[dict] = [measure(module_path, steps) for steps in arguments.steps]
    if arguments.json:
        print(json.dumps(rows))
        return
    first = rows[0]
    print(f"wasm32 record sizes: Op {first['op_bytes']} B, Layer {first['layer_bytes']} B")
    print(f"{'ops':>8}  {'linear memory B/op':>18}  {'op and layer tables B/op':>24}")
    for row in rows:
        memory, tables = row["linear_memory_bytes_per_op"], row["tables_bytes_per_op"]
        print(f"{row['ops']:>8}  {memory:>18.0f}  {tables:>24.0f}")


if __name__ == "__main__":
    sys.exit(main())
