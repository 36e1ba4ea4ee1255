"""Runs the README's torch example under two hosts of the core and checks that the `.tlspec`
files they write are equal byte for byte, except the creation time.

    python scripts/checks/host_tlspec_equality.py [--native-python PY] [--pure-python PY]

Each side runs in its own interpreter (the host is chosen once per process): by default the
current one with ``TORCHLENS_HOST=native`` and ``TORCHLENS_HOST=wasmtime-py``; with
``--pure-python``, that interpreter (a fresh venv holding only the ``py3-none-any`` wheel) runs
the wasmtime-py side with no host forced, so the check also shows that such an install picks
the wasmtime-py host by itself. Exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Dict, Optional

# The README's example (README.md, the torch block), seeded so both runs build the same weights,
# saving to argv[1].
EXAMPLE = r"""
import json, sys
import torch, torchlens as tl

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
trace = tl.trace(model, torch.ones(1, 3))
print(trace.summary())
trace["relu_1_3"].out
trace.select(tl.func("linear") & ~tl.in_module("2"))
trace.save(sys.argv[1]); tl.load(sys.argv[1])
trace.draw(sys.argv[1] + ".svg", collapsed=True)
small = tl.trace(model, torch.ones(1, 3), save=tl.func("relu"))
recording = tl.record(model, torch.ones(1, 3), save=tl.func("relu"))
recording["relu_1_3"].out
print(json.dumps(tl.versions()))
"""

# `created_at` is an ISO time of fixed width, so blanking its value keeps every offset.
CREATED_AT = re.compile(rb'("created_at"\s*:\s*")([^"]*)(")')


def without_creation_time(data: bytes) -> bytes:
    """The file with the value of its header's ``created_at`` blanked (same length) and the
    body's check block, the CRC-32 of the length field and header (docs/tlspec-format.md,
    section 2.1), recomputed to match: the one checksum the creation time reaches."""
    header_end = 8 + int.from_bytes(data[:8], "little")
    header = CREATED_AT.sub(
        lambda match: match.group(1) + b"-" * len(match.group(2)) + match.group(3), data[:header_end], count=1
    )
    check = zlib.crc32(header).to_bytes(4, "little")
    return header + check + data[header_end + 4 :]


def run_example(
    python: str, out: Path, workdir: Path, host: Optional[str], isolated: bool = False
) -> Dict[str, str]:
    """Runs the example under ``python``; returns the ``tl.versions()`` it printed. ``isolated``
    drops ``PYTHONPATH``, so a fresh venv sees only what is installed in it."""
    environment = dict(os.environ)
    environment.pop("TORCHLENS_HOST", None)
    if isolated:
        environment.pop("PYTHONPATH", None)
    if host is not None:
        environment["TORCHLENS_HOST"] = host
    completed = subprocess.run(
        [python, "-c", EXAMPLE, str(out)], cwd=workdir, env=environment, capture_output=True, text=True
    )
    if completed.returncode != 0:
        raise SystemExit(f"the example failed under {python} (host {host}):\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def compare(native_python: str, pure_python: Optional[str]) -> int:
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        native_file, pure_file = workdir / "native.tlspec", workdir / "pure.tlspec"
        native = run_example(native_python, native_file, workdir, "native")
        if pure_python:
            pure = run_example(pure_python, pure_file, workdir, None, isolated=True)
        else:
            pure = run_example(native_python, pure_file, workdir, "wasmtime-py")
        print(f"native host:      {native}")
        print(f"wasmtime-py host: {pure}")
        if pure.get("host") != "wasmtime-py" or native.get("host") != "native":
            print("the runs did not use the two hosts")
            return 1
        if pure.get("core_build_id") != native.get("core_build_id"):
            print("the hosts run different component builds")
            return 1
        native_bytes, pure_bytes = native_file.read_bytes(), pure_file.read_bytes()
        if native_bytes == pure_bytes:
            print(f"identical .tlspec files ({len(native_bytes)} bytes)")
            return 0
        if without_creation_time(native_bytes) == without_creation_time(pure_bytes):
            print(f"identical .tlspec files except the creation time ({len(native_bytes)} bytes)")
            return 0
        first = next(
            (index for index, pair in enumerate(zip(native_bytes, pure_bytes)) if pair[0] != pair[1]),
            min(len(native_bytes), len(pure_bytes)),
        )
        print(f"the files differ: {len(native_bytes)} vs {len(pure_bytes)} bytes, first at byte {first}")
        return 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--native-python", default=sys.executable, help="an interpreter with the native extension"
    )
    parser.add_argument("--pure-python", help="an interpreter with only the py3-none-any wheel installed")
    arguments = parser.parse_args()
    return compare(arguments.native_python, arguments.pure_python)


if __name__ == "__main__":
    sys.exit(main())
