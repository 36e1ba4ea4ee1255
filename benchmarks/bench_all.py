"""Every performance figure in one run, ours beside the reference's (torchlens 2.36.1) with the
ratios, and the issue's targets checked; written as the tables of docs/performance.md.

    python benchmarks/bench_all.py --reference-python .venv-reference/bin/python \\
        --tlspec target/release/tlspec [--write docs/performance.md] [--repeats N]

(``make bench-all`` sets the reference environment up and runs this.) Each part runs in its own
process through the script that owns it, so one framework's threads and caches never touch
another's: torch_overhead.py, the preview frameworks' *_overhead.py, save_load.py and scale.py.
A part that fails is reported as failed in the table; the others still run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))

#: What a part left out with ``--only`` reports (its rows are left out of the tables).
NOT_RUN = "not run (--only)"

#: (backend, script) of the capture-cost parts, in table order.
CAPTURE_SCRIPTS = (
    ("torch", "torch_overhead.py"),
    ("jax", "jax_overhead.py"),
    ("tf", "tf_overhead.py"),
    ("mlx", "mlx_overhead.py"),
    ("paddle", "paddle_overhead.py"),
    ("tinygrad", "tinygrad_overhead.py"),
)

#: Torch workloads the issue sets targets on: (model, what is checked, limit, unit).
TORCH_TARGETS = (
    ("deep_mlp_50", "per_op_us", 10.0, "µs per op above plain"),
    ("transformer_6", "per_op_us", 10.0, "µs per op above plain"),
    ("fixed_cost", "fixed_us", 200.0, "µs per trace above plain"),
    ("resnet18", "ratio", 1.10, "× plain"),
    ("resnet18_b8", "ratio", 1.03, "× plain"),
)

#: Preview-framework workloads whose speed-up over the reference the issue sets (JAX, ≥ 30×).
JAX_TARGET_WORKLOADS = ("chain_300", "mlp_20")


CAPTURE_HEADER = (
    "backend",
    "workload",
    "ops",
    "plain ms",
    "× plain",
    "µs/op",
    "reference ops",
    "reference × plain",
    "reference µs/op",
    "speed-up per op",
    "note",
)


def part_environment() -> Dict[str, str]:
    """The environment of every part: this one, with ``PYTHONPATH`` made absolute. The parts run
    in the benchmarks folder, where a relative entry (``PYTHONPATH=host-python/python``) would
    silently name nothing and the parts would measure whatever ``torchlens`` is installed."""
    environment = dict(os.environ)
    entries = [entry for entry in environment.get("PYTHONPATH", "").split(os.pathsep) if entry]
    if entries:
        environment["PYTHONPATH"] = os.pathsep.join(os.path.abspath(entry) for entry in entries)
    return environment


def measured_package() -> str:
    """Where the ``torchlens`` the parts import lives (found, not imported)."""
    done = subprocess.run(
        [sys.executable, "-c", "import importlib.util; print(importlib.util.find_spec('torchlens').origin)"],
        capture_output=True,
        text=True,
        cwd=HERE,
        env=part_environment(),
    )
    origin = done.stdout.strip()
    return os.path.relpath(os.path.dirname(origin), os.path.dirname(HERE)) if origin else "not found"


def run_part(arguments: List[str], timeout: float) -> Dict[str, Any]:
    """Runs one benchmark script; its last line of output is its JSON result."""
    try:
        done = subprocess.run(
            [sys.executable, *arguments],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=HERE,
            env=part_environment(),
        )
    except subprocess.TimeoutExpired:
        return {"failed": f"did not finish in {timeout:.0f} s"}
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"failed": f"exit {done.returncode}: {' / '.join(tail)[:300]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def per_op(row: Dict[str, Any]) -> Optional[float]:
    """µs per op above the plain call, or None for a row that failed."""
    if not row or "failed" in row:
        return None
    return figure_of("per_op_us", row, "full")


def capture_rows(backend: str, part: Dict[str, Any]) -> List[Tuple[str, ...]]:
    """Table rows of one backend's capture part."""
    if "failed" in part:
        return [(backend, "—", "—", "—", "—", "—", "—", "—", "—", f"failed: {part['failed']}")]
    rows = []
    for name, ours in part["ours"].items():
        reference = part.get("reference", {}).get(name, {})
        if "failed" in ours:
            rows.append((backend, name, "—", "—", "—", "—", "—", "—", "—", f"failed: {ours['failed']}"))
            continue
        ours_per_op = per_op(ours)
        reference_per_op = per_op(reference)
        if reference_per_op is None:
            reference_cells = ("—", "—", "—", "—")
            note = f"reference failed: {reference['failed']}" if "failed" in reference else "no reference run"
        else:
            # Per op over the whole capture (not above plain): a function whose plain call compiles
            # (an eager lax.scan) can cost more than its trace, which makes "above plain" negative.
            speed_up = (reference["full"] / reference["ops"]) / (ours["full"] / ours["ops"])
            reference_cells = (
                str(reference["ops"]),
                f"{reference['full'] / reference['plain']:.2f}",
                f"{reference_per_op:.1f}",
                f"{speed_up:.1f}×",
            )
            note = ""
            if reference["ops"] * 2 < ours["ops"]:
                # The reference recorded far fewer ops (it fused or skipped them): per-op figures
                # are not like for like; the whole-capture times still compare.
                note = f"reference saw {reference['ops']} ops, we saw {ours['ops']}: compare × plain"
        rows.append(
            (
                backend,
                name,
                str(ours["ops"]),
                f"{ours['plain'] * 1e3:.2f}",
                f"{ours['full'] / ours['plain']:.2f}",
                f"{ours_per_op:.1f}",
                *reference_cells,
                note,
            )
        )
    return rows


def figure_of(kind: str, row: Dict[str, Any], run: str) -> float:
    """A target's figure for one run of a row (``full``: the trace; ``floor``; ``full_varied``:
    the trace on inputs that change shape every call, against ``plain_varied``): µs per op or
    per trace above plain, or the ratio to plain."""
    plain = row["plain_varied"] if run.endswith("_varied") else row["plain"]
    if kind == "per_op_us":
        return (row[run] - plain) / row["ops"] * 1e6
    if kind == "fixed_us":
        return (row[run] - plain) * 1e6
    return row[run] / plain


def torch_checks(part: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """(target, measured, met?) for the torch targets."""
    checks = []
    ours = part.get("ours", {})
    for model, kind, limit, unit in TORCH_TARGETS:
        row = ours.get(model)
        if row is None or "failed" in row:
            checks.append((f"torch {model}: ≤ {limit} {unit}", "not measured", "no"))
            continue
        value = figure_of(kind, row, "full")
        shown = f"{value:.2f}" if kind == "ratio" else f"{value:.1f}"
        met = "yes" if value <= limit else "no"
        if "floor" in row:
            # The same figure for the floor under any capture that saves every value
            # (torch_floor.py), measured in the same turns: what no recorder can go below.
            floor = figure_of(kind, row, "floor")
            shown += f" (floor {floor:.2f})" if kind == "ratio" else f" (floor {floor:.1f})"
            if floor >= limit and value > limit:
                # Said in the table, so a reader does not look for the cost in the recorder.
                met = "no: the floor alone reaches the target"
        if "full_varied" in row:
            # A trace whose events differ from the last capture's (the core builds it instead of
            # being given the last one's): what the first trace of a model or shape costs.
            shown += f"; events new to the core: {figure_of(kind, row, 'full_varied'):.1f}"
        checks.append((f"torch {model}: ≤ {limit} {unit}", shown, met))
    return checks


def jax_checks(part: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    checks = []
    for name in JAX_TARGET_WORKLOADS:
        ours = part.get("ours", {}).get(name)
        reference = part.get("reference", {}).get(name)
        if not ours or not reference or "failed" in ours or "failed" in reference:
            checks.append((f"jax {name}: ≥ 30× faster per op than the reference", "not measured", "no"))
            continue
        speed_up = (reference["full"] / reference["ops"]) / (ours["full"] / ours["ops"])
        checks.append(
            (
                f"jax {name}: ≥ 30× faster per op than the reference",
                f"{speed_up:.1f}×",
                "yes" if speed_up >= 30 else "no",
            )
        )
    return checks


def markdown_table(header: Tuple[str, ...], rows: List[Tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


#: Distributions whose versions head the document (read from their metadata: nothing is imported).
DISTRIBUTIONS = ("torch", "jax", "tensorflow-cpu", "keras", "mlx", "paddlepaddle", "tinygrad", "wasmtime")


def machine_line() -> str:
    from importlib import metadata

    versions = []
    for distribution in DISTRIBUTIONS:
        try:
            versions.append(f"{distribution} {metadata.version(distribution)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{distribution} absent")
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {', '.join(versions)}; "
        f"torchlens measured from `{measured_package()}`"
    )


def load_line(start: Tuple[float, float, float], end: Tuple[float, float, float]) -> str:
    """The machine's load average when the run started and ended: per-op figures of small models
    move with anything else running, so the document says how busy the machine was."""
    return f"load average {start[0]:.1f} at the start, {end[0]:.1f} at the end (1-minute)"


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE)
    return done.stdout.strip() or "unknown"


def document(parts: Dict[str, Dict[str, Any]], machine: str, load: str = "") -> str:
    """The whole of docs/performance.md."""
    capture = []
    for backend, _script in CAPTURE_SCRIPTS:
        if parts[backend].get("failed") != NOT_RUN:
            capture += capture_rows(backend, parts[backend])
    checks = torch_checks(parts["torch"]) + jax_checks(parts["jax"])
    save = parts["save"]
    save_rows = []
    if "failed" in save:
        save_rows.append(("resnet18 batch 8, every op saved", f"failed: {save['failed']}", "", ""))
    else:
        reference_save = save.get("reference_save_ms")
        save_rows = [
            ("file size", f"{save['mb']:.0f} MB", "", ""),
            (
                "save to a new path (warm page cache)",
                f"{save['save_new_ms']:.0f} ms",
                f"{reference_save:.0f} ms" if reference_save else "n/a",
                f"{reference_save / save['save_new_ms']:.1f}×" if reference_save else "",
            ),
            (
                "plain write of the same bytes to a new path (same turns; ratio: save ÷ it)",
                f"{save['plain_write_new_ms']:.0f} ms",
                "",
                f"{save['save_new_ms'] / save['plain_write_new_ms']:.2f}×",
            ),
            ("save over the same path", f"{save['save_overwrite_ms']:.0f} ms", "", ""),
            ("save throughput", f"{save['mb_per_s']:.0f} MB/s", "", ""),
            ("peak memory during save above the trace's own", f"{save['peak_over_trace_pct']:.1f} %", "", ""),
            ("load (lazy: header and body, payloads mapped)", f"{save['load_ms']:.1f} ms", "", ""),
            ("read every value back", f"{save['read_all_gb_per_s']:.1f} GB/s", "", ""),
        ]
        checks.append(
            (
                "save resnet18 batch 8: < 200 ms (warm page cache)",
                f"{save['save_new_ms']:.0f} ms"
                f" (a plain write of the same bytes: {save['plain_write_new_ms']:.0f} ms)",
                "yes" if save["save_new_ms"] < 200 else "no",
            )
        )
        checks.append(
            (
                "peak memory during save: ≤ 5 % above the trace's own",
                f"{save['peak_over_trace_pct']:.1f} %",
                "yes" if save["peak_over_trace_pct"] <= 5 else "no",
            )
        )
    scale = parts["scale"]
    if "failed" in scale:
        scale_table = f"failed: {scale['failed']}"
    else:
        scale_rows = [
            (
                str(row["ops"]),
                f"{row['capture_s']:.2f}",
                f"{row['capture_s'] / row['ops'] * 1e6:.1f}",
                f"{row['save_s']:.2f}",
                f"{row['load_s']:.2f}",
                f"{row['cli_inspect_s']:.2f}",
                f"{row['metadata_bytes_per_op']:.0f}",
                f"{row['saved_all_bytes_per_op']:.0f}",
                f"{row['file_bytes_per_op']:.0f}",
            )
            for row in scale["rows"]
        ]
        scale_table = markdown_table(
            (
                "ops",
                "capture s",
                "capture µs/op",
                "save s",
                "load s",
                "CLI inspect s",
                "memory B/op (save=False)",
                "memory B/op (every value saved)",
                "file B/op (no payloads)",
            ),
            scale_rows,
        )
        scale_table += "\n\nLog-log slope of time against ops (1.0 is linear): " + ", ".join(
            f"{key.replace('_s', '')} {value:.2f}" for key, value in scale["slopes"].items()
        )
        largest = scale["rows"][-1]
        checks.append(
            (
                f"scale {largest['ops']} ops: ≤ 300 B/op in memory",
                f"{largest['metadata_bytes_per_op']:.0f} B/op",
                "yes" if largest["metadata_bytes_per_op"] <= 300 else "no",
            )
        )
        checks.append(
            (
                f"scale {largest['ops']} ops: ≤ 150 B/op in the file",
                f"{largest['file_bytes_per_op']:.0f} B/op",
                "yes" if largest["file_bytes_per_op"] <= 150 else "no",
            )
        )
    frameworks = "; ".join(
        parts[backend].get("framework", backend)
        for backend, _ in CAPTURE_SCRIPTS
        if "failed" not in parts[backend]
    )
    return f"""# Performance

Written by `make bench-all` (`benchmarks/bench_all.py`) on {datetime.date.today().isoformat()} at commit
`{commit()}`; do not edit by hand. Machine: {machine}; {load}. Frameworks as the scripts report them:
{frameworks}. Each figure is a median of runs taken in turns with the plain call; the reference
(torchlens 2.36.1) runs the same workloads in the same invocation, in `.venv-reference`, on the
same framework installations.

## Capture cost

"µs/op" is the trace's time minus the plain call's, divided by the ops the trace recorded; "×
plain" is the trace's time over the plain call's. The speed-up is per op over the whole capture
(the reference's time per op over ours), which stays meaningful where a plain call costs more than
a trace (an eager `lax.scan` compiles on every plain call).

{markdown_table(CAPTURE_HEADER, capture)}

## Saves and loads (torch resnet18, batch 8, 224², every op saved)

{markdown_table(("what", "ours", "reference", "ratio"), save_rows)}

## Scale (a long loop of small torch ops)

{scale_table}

## Targets (issue 19)

A torch figure's "floor" is the same figure for a function mode that only holds every output and
runs in-place ops out of place (`benchmarks/torch_floor.py`), timed in the same turns: the least
any capture that saves every value pays, before it records anything. A trace whose events equal
the last capture's (the same model on the same shapes, as every timed run here repeats) is given
that capture's trace by the core instead of building it again; "events new to the core" is the
same figure on inputs that change shape every call (`plain_varied` against `full_varied` in
`benchmarks/torch_overhead.py`): what a model's first trace, or one on a new shape, costs.

{markdown_table(("target", "measured", "met"), checks)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference-python", help="a Python with the reference torchlens 2.36.1")
    parser.add_argument("--tlspec", default="target/release/tlspec", help="the CLI binary (scale part)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--reference-timeout",
        type=float,
        default=90.0,
        help="seconds the reference may take per preview-framework function (slower: reported as such)",
    )
    parser.add_argument("--write", help="write the tables to this Markdown file too")
    parser.add_argument("--only", nargs="+", help="run only these parts (torch, jax, ..., save, scale)")
    arguments = parser.parse_args()
    reference = (
        ["--reference-python", os.path.abspath(arguments.reference_python)]
        if arguments.reference_python
        else []
    )
    wanted = set(arguments.only or [backend for backend, _ in CAPTURE_SCRIPTS] + ["save", "scale"])
    parts: Dict[str, Dict[str, Any]] = {}
    load_at_start = os.getloadavg()
    for backend, script in CAPTURE_SCRIPTS:
        if backend in wanted:
            print(f"measuring {backend} ...", file=sys.stderr, flush=True)
            extra = [] if backend == "torch" else ["--reference-timeout", str(arguments.reference_timeout)]
            parts[backend] = run_part(
                [script, "--json", "--repeats", str(arguments.repeats), *reference, *extra], 3600
            )
        else:
            parts[backend] = {"failed": NOT_RUN}
    if "save" in wanted:
        print("measuring save and load ...", file=sys.stderr, flush=True)
        parts["save"] = run_part(["save_load.py", "--json", *reference], 1800)
    else:
        parts["save"] = {"failed": NOT_RUN}
    if "scale" in wanted:
        print("measuring scale ...", file=sys.stderr, flush=True)
        parts["scale"] = run_part(["scale.py", "--json", "--tlspec", os.path.abspath(arguments.tlspec)], 3600)
    else:
        parts["scale"] = {"failed": NOT_RUN}
    text = document(parts, machine_line(), load_line(load_at_start, os.getloadavg()))
    print(text)
    if arguments.write:
        with open(arguments.write, "w", encoding="utf-8") as out:
            out.write(text)


if __name__ == "__main__":
    main()
