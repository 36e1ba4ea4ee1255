"""How fast ``trace.save`` writes and ``tl.load`` reads back a large trace: torchvision's
resnet18 at batch 8 (224x224, every op saved, a file of about 268 MB), with a warm page cache.

    python benchmarks/save_load.py [--repeats N] [--reference-python PATH] [--json]

Figures (medians of ``--repeats`` runs after one warm-up):

- save to a new path (the previous file is removed, and the removal synced, outside the timed
  region), in turns with a plain write of the same payload bytes to a new path (temporary file,
  fsync, rename: the floor the disk and page cache give), and over the same path, back to back
  (the package frees the replaced file's blocks in the background), in ms and MB/s;
- where the package reports them, the phases of one save: encode (the core lays the file out),
  write + CRC (payload bytes written and checksummed in one pass), fsync, rename;
- peak resident memory during a save above the memory before it, as a share of the trace's own
  payload bytes (VmHWM after resetting it by writing ``5`` to
  ``/proc/self/clear_refs``);
- ``tl.load`` (lazy: header and body are read and checked, payloads are mapped, not read), and
  reading every value back once (``sum`` of every payload of a freshly loaded trace, page faults
  included) in GB/s, next to the same ``sum`` over the in-memory trace's values (memory speed).

With ``--reference-python`` (a Python with the reference torchlens 2.36.1), the reference's
``tl.save`` of the same model's trace is timed in that interpreter, same run. ``--json`` prints
one JSON object instead of the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

import torch
from measurement import interleaved, measure_in_reference_python, timed

BATCH = 8
MB = 1e6


def model_and_input() -> tuple:
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval(), torch.randn(BATCH, 3, 224, 224)


def resident_bytes(key: str) -> int:
    """A ``/proc/self/status`` memory figure (``VmRSS:``, ``VmHWM:``) in bytes."""
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {key}")


def reset_peak() -> bool:
    """Resets VmHWM to the current resident size; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def median_seconds(run: Callable[[], object], prepare: Callable[[], object], repeats: int) -> float:
    """Median of ``repeats`` timed runs, each after an untimed ``prepare``."""
    samples = []
    for _ in range(repeats):
        prepare()
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def remove(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)


def settle() -> None:
    """Commits what earlier steps left the file system (dirty pages, a removal's freed blocks),
    so that the next timed step does not pay for it. No pause after it: on the 2-core VM this
    was written on, writes into the page cache after a one-second pause ran 1.5-3x slower,
    plain writes as much as ours (freed memory handed back to the VM's host, most likely)."""
    os.sync()


def remove_and_settle(path: str) -> None:
    """Removes the previous file, then lets the file system finish freeing it."""
    remove(path)
    settle()


def plain_write(buffers: List[memoryview], path: str) -> None:
    """The floor under a save: the same payload bytes written as a save writes them (a
    temporary file in the same folder, fsync, rename over ``path``), with no layout, no
    checksums and no threads."""
    temporary = path + ".plain"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for buffer in buffers:
            while buffer:
                buffer = buffer[os.write(fd, buffer) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def save_phases(trace: Any, path: str, repeats: int) -> Optional[Dict[str, float]]:
    """Median seconds of each phase of a save over an existing file, where the package reports
    them (``phase_seconds``); None otherwise."""
    from torchlens import tlspec_io

    samples: Dict[str, List[float]] = {}
    for _ in range(repeats):
        phases: Dict[str, float] = {}
        try:
            tlspec_io.save(trace, path, phase_seconds=phases)
        except TypeError:
            return None
        for name, seconds in phases.items():
            samples.setdefault(name, []).append(seconds)
    return {name: statistics.median(values) for name, values in samples.items()}


def peak_during_save(trace: Any, path: str, repeats: int) -> Optional[int]:
    """The largest rise of resident memory during one save, over ``repeats`` saves."""
    rises = []
    for _ in range(repeats):
        remove(path)
        gc.collect()
        before = resident_bytes("VmRSS:")
        if not reset_peak():
            return None
        trace.save(path)
        rises.append(resident_bytes("VmHWM:") - before)
    return max(rises)


def read_all(values: List[Any]) -> float:
    """Reads every value once (a sum touches each byte); returns a total so nothing is skipped."""
    total = 0.0
    for value in values:
        total += float(value.sum())
    return total


def measure_ours(repeats: int) -> dict:
    import torchlens as tl

    model, x = model_and_input()
    with torch.no_grad():
        model(x)
        trace = tl.trace(model, x)
    values = [op.out for op in trace.saved_ops]
    trace_bytes = sum(value.nbytes for value in values)
    folder = tempfile.mkdtemp(prefix="save-load-")
    try:
        path = os.path.join(folder, "resnet18.tlspec")
        trace.save(path)  # warm-up: the component, the page cache, the folder
        # In turns with a plain write of the same bytes, each after the previous file is removed:
        # this VM's page cache is fast or slow for a while (memory the host took back), and
        # both pay alike.
        buffers = [memoryview(value.detach().contiguous().numpy()).cast("B") for value in values]
        new_path = interleaved(
            {"save": lambda: trace.save(path), "plain_write": lambda: plain_write(buffers, path)},
            max(repeats, 9),
            prepare=lambda: remove_and_settle(path),
        )
        save_new, plain_write_new = new_path["save"], new_path["plain_write"]
        settle()
        save_overwrite = timed(lambda: trace.save(path), repeats)
        file_bytes = os.path.getsize(path)
        phases = save_phases(trace, path, repeats)
        peak = peak_during_save(trace, path, max(3, repeats // 2))
        settle()

        load = timed(lambda: tl.load(path), repeats)
        loaded_values: List[Any] = []

        def fresh_load() -> None:
            loaded_values.clear()
            gc.collect()
            loaded = tl.load(path)
            loaded_values.extend(op.out for op in loaded.saved_ops)

        read_loaded = median_seconds(lambda: read_all(loaded_values), fresh_load, repeats)
        loaded_values.clear()
        read_memory = timed(lambda: read_all(values), repeats)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "ops": len(trace),
        "payloads": len(values),
        "trace_bytes": trace_bytes,
        "file_bytes": file_bytes,
        "save_new": save_new,
        "plain_write_new": plain_write_new,
        "save_overwrite": save_overwrite,
        "phases": phases,
        "peak_rise": peak,
        "load": load,
        "read_loaded": read_loaded,
        "read_memory": read_memory,
    }


def measure_reference(repeats: int) -> dict:
    """The reference's ``tl.save`` (a directory bundle with the activations) of the same trace."""
    import torchlens as reference

    save = getattr(reference, "save", None)
    if save is None:
        return {"save": None, "why": "the reference has no tl.save"}
    model, x = model_and_input()
    with torch.no_grad():
        model(x)
        trace = reference.trace(model, x)
    folder = tempfile.mkdtemp(prefix="save-load-reference-")
    try:
        warm = os.path.join(folder, "warm-up")
        save(trace, warm)
        size = sum(
            os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(warm) for name in names
        )
        path = os.path.join(folder, "resnet18")

        def fresh() -> None:  # as for ours: the previous bundle removed, the disk settled
            shutil.rmtree(path, ignore_errors=True)
            settle()

        seconds = median_seconds(lambda: save(trace, path), fresh, repeats)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"save": seconds, "bytes": size}


def summary(ours: dict, reference: Optional[dict]) -> dict:
    """The figures ``make bench-all`` reads (one JSON object)."""
    mb = ours["file_bytes"] / MB
    peak = ours["peak_rise"]
    reference_save = reference.get("save") if reference else None
    phases = ours["phases"]
    return {
        "save_new_ms": ours["save_new"] * 1e3,
        "plain_write_new_ms": ours["plain_write_new"] * 1e3,
        "save_overwrite_ms": ours["save_overwrite"] * 1e3,
        "mb": mb,
        "mb_per_s": mb / ours["save_new"],
        "peak_over_trace_pct": None if peak is None else peak / ours["trace_bytes"] * 100,
        "load_ms": ours["load"] * 1e3,
        "read_all_gb_per_s": ours["trace_bytes"] / ours["read_loaded"] / 1e9,
        "reference_save_ms": None if reference_save is None else reference_save * 1e3,
        "in_memory_read_gb_per_s": ours["trace_bytes"] / ours["read_memory"] / 1e9,
        "phases_ms": None if phases is None else {name: s * 1e3 for name, s in phases.items()},
        "ops": ours["ops"],
        "payloads": ours["payloads"],
    }


def report(figures: dict, reference: Optional[dict]) -> None:
    mb = figures["mb"]
    print(f"resnet18 batch {BATCH}: {figures['ops']} ops, {figures['payloads']} payloads, {mb:.0f} MB file")
    print(f"  {'save, new path':<34}{figures['save_new_ms']:>9.1f} ms {figures['mb_per_s']:>8.0f} MB/s")
    plain = figures["plain_write_new_ms"]
    same_bytes = "plain write of the same bytes"
    print(f"  {same_bytes:<34}{plain:>9.1f} ms {mb / plain * 1e3:>8.0f} MB/s (same turns)")
    overwrite = figures["save_overwrite_ms"]
    print(f"  {'save, same path (overwrite)':<34}{overwrite:>9.1f} ms {mb / overwrite * 1e3:>8.0f} MB/s")
    for name, milliseconds in (figures["phases_ms"] or {}).items():
        print(f"    {name:<32}{milliseconds:>9.1f} ms")
    peak = figures["peak_over_trace_pct"]
    print(f"  {'peak memory during save':<34}{'n/a' if peak is None else f'{peak:+.1f} % of the trace':>12}")
    print(f"  {'tl.load (lazy)':<34}{figures['load_ms']:>9.1f} ms")
    print(
        f"  {'read every value back':<34}{figures['read_all_gb_per_s']:>9.2f} GB/s"
        f" (in memory: {figures['in_memory_read_gb_per_s']:.2f} GB/s)"
    )
    reference_ms = figures["reference_save_ms"]
    if reference is not None:
        if reference_ms is None:
            print(f"  {'reference 2.36.1 save':<34}{'n/a':>9} ({reference.get('why', '')})")
        else:
            print(
                f"  {'reference 2.36.1 save':<34}{reference_ms:>9.1f} ms"
                f" ({reference['bytes'] / MB:.0f} MB;"
                f" ours is {reference_ms / figures['save_new_ms']:.1f}x faster)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference-python", help="a Python with the reference torchlens 2.36.1")
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--mode", choices=["ours", "reference", "compare"], default="compare")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    if arguments.mode == "reference":
        print(json.dumps(measure_reference(arguments.repeats)))
        return
    ours = measure_ours(arguments.repeats)
    if arguments.mode == "ours":
        print(json.dumps(ours))
        return
    reference = None
    if arguments.reference_python:
        try:
            reference = measure_in_reference_python(
                arguments.reference_python,
                os.path.abspath(__file__),
                max(1, arguments.repeats // 2),
                timeout=900,
            )
        except subprocess.CalledProcessError as error:
            last = (error.stderr or "").strip().splitlines()[-1:] or ["no output"]
            reference = {"save": None, "why": f"the reference run failed: {last[0]}"}
        if "failed" in reference:
            reference = {"save": None, "why": reference["failed"]}
    figures = summary(ours, reference)
    if arguments.json:
        print(json.dumps(figures))
    else:
        report(figures, reference)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
