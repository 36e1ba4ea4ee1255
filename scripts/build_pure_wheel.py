"""Builds the ``py3-none-any`` wheel of torchlens: the Python package, the core component
(``torchlens/torchlens_core.wasm``, the same bytes the platform wheel embeds) and a dependency
on the ``wasmtime`` package, which runs the component (torchlens/_hosts/wasmtime_py/).

    python scripts/build_pure_wheel.py --component target/wasm32-wasip2/release/torchlens_core.wasm --out dist

Metadata (name, version, dependencies, extras) comes from pyproject.toml, so the two wheels
never disagree on them. The archive is deterministic: sorted entries, fixed timestamps.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the repo's venv is 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "host-python" / "python" / "torchlens"
# The built-in backends (backends/<name>/ and their scorecard records) enter this wheel the way
# the platform wheel's build backend adds them: one list of files for both.
sys.path.insert(0, str(ROOT / "host-python" / "build_backend"))
from torchlens_build_backend import backend_files  # noqa: E402

#: The wasmtime-py host reads the C API of this major version (see _hosts/wasmtime_py/values.py).
WASMTIME_REQUIREMENT = "wasmtime>=50,<51"
COMPONENT_NAME = "torchlens_core.wasm"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _metadata(project: dict) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', '')}",
        f"Requires-Python: {project.get('requires-python', '>=3.9')}",
    ]
    for requirement in [*project.get("dependencies", []), WASMTIME_REQUIREMENT]:
        lines.append(f"Requires-Dist: {requirement}")
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for requirement in requirements:
            name, _, marker = requirement.partition(";")
            condition = f"({marker.strip()}) and extra == '{extra}'" if marker else f"extra == '{extra}'"
            lines.append(f"Requires-Dist: {name.strip()}; {condition}")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return "\n".join(lines) + "\nDescription-Content-Type: text/markdown\n\n" + readme


def _package_files() -> list:
    files = []
    for path in sorted(PACKAGE.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        # The native extension belongs to the platform wheel only.
        if path.suffix in (".so", ".pyd", ".pyc") or path.name == COMPONENT_NAME:
            continue
        files.append((f"torchlens/{path.relative_to(PACKAGE).as_posix()}", path.read_bytes()))
    files.extend((target, source.read_bytes()) for target, source in backend_files(ROOT))
    return files


def _entry_points(project: dict) -> str:
    """``entry_points.txt``: the backends' ``torchlens.backends`` group, as pyproject.toml
    declares it (the platform wheel gets the same from maturin)."""
    sections = []
    for group, entries in project.get("entry-points", {}).items():
        lines = [f"[{group}]", *(f"{name} = {target}" for name, target in entries.items())]
        sections.append("\n".join(lines) + "\n")
    return "\n".join(sections)


def build(component: Path, out: Path) -> Path:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wasm = component.read_bytes()
    if wasm[:4] != b"\0asm":
        raise SystemExit(f"{component} is not a WebAssembly component")
    name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    dist_info = f"{name}-{project['version']}.dist-info"
    entries = _package_files()
    entries.append((f"torchlens/{COMPONENT_NAME}", wasm))
    entries.append((f"{dist_info}/METADATA", _metadata(project).encode()))
    entries.append((f"{dist_info}/entry_points.txt", _entry_points(project).encode()))
    wheel = (
        "Wheel-Version: 1.0\nGenerator: torchlens scripts/build_pure_wheel.py\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n"
    )
    entries.append((f"{dist_info}/WHEEL", wheel.encode()))
    record_name = f"{dist_info}/RECORD"
    record = (
        "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in entries) + f"{record_name},,\n"
    )
    entries.append((record_name, record.encode()))

    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}-{project['version']}-py3-none-any.whl"
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in entries:
            info = zipfile.ZipInfo(path, date_time=FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    partial.replace(target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--component", type=Path, required=True, help="the core component (.wasm)")
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    arguments = parser.parse_args()
    print(build(arguments.component, arguments.out))


if __name__ == "__main__":
    main()
