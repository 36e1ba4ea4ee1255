"""The PEP 517 build backend of the ``torchlens`` distribution (``pyproject.toml`` names it).

maturin builds the package from ``host-python/`` (the pyo3 extension with the core component,
and the Python sources under ``host-python/python/``); this backend then adds the built-in
backends, which live at the top of the repository as plugins: each ``backends/<name>/`` folder
(one with a ``declaration.py``) lands at ``torchlens/backends/<name>/`` in the same wheel, with
its scorecard record ``scorecards/<name>.json`` as ``torchlens/backends/<name>/scorecard.json``
(where the spec says it ships). Each one is registered through the ``torchlens.backends`` entry
point that ``pyproject.toml`` declares, the seam a third party's adapter uses too.

maturin cannot do this itself: a wheel takes one Python source folder, and its ``include``
globs keep their paths relative to the project, so ``backends/torch`` would land as a top-level
``backends`` package. Nothing is copied in the source tree and nothing is linked; the sdist
carries ``backends/``, ``scorecards/`` and this folder (``[tool.maturin] include``), so a wheel
built from it is the same.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

import maturin

#: The repository root (or the unpacked sdist's root): this file is host-python/build_backend/.
ROOT = Path(__file__).resolve().parent.parent.parent


def backend_files(root: Path = ROOT) -> List[Tuple[str, Path]]:
    """``(path in the wheel, source file)`` for every built-in backend, in a stable order: the
    files of each ``backends/<name>/`` holding a ``declaration.py`` (no bytecode caches, and no
    Rust crate: a backend's native code, such as ``backends/torch/native/``, is compiled into the
    extension module), then its scorecard record."""
    files: List[Tuple[str, Path]] = []
    folders = sorted(path for path in (root / "backends").iterdir() if (path / "declaration.py").is_file())
    for folder in folders:
        target = f"torchlens/backends/{folder.name}"
        crates = [path.parent for path in folder.rglob("Cargo.toml")]
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            if any(crate in path.parents for crate in crates):
                continue
            files.append((f"{target}/{path.relative_to(folder).as_posix()}", path))
        record = root / "scorecards" / f"{folder.name}.json"
        if record.is_file():
            files.append((f"{target}/scorecard.json", record))
    return files


def record_hash(data: bytes) -> str:
    """A wheel RECORD hash: ``sha256=`` and the urlsafe base64 digest without padding."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def add_to_wheel(wheel: Path, files: List[Tuple[str, Path]]) -> None:
    """Rewrites ``wheel`` with ``files`` added and its RECORD recomputed (written to a partial
    file, then renamed over the wheel, so a failure leaves maturin's wheel as it was)."""
    with zipfile.ZipFile(wheel) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    record_name = next(info.filename for info, _ in entries if info.filename.endswith(".dist-info/RECORD"))
    present = {info.filename for info, _ in entries}
    clashes = [path for path, _ in files if path in present]
    if clashes:
        raise RuntimeError(f"the package already holds {clashes[0]}: a backend must live in backends/ only")
    kept = [(info, data) for info, data in entries if info.filename != record_name]
    added = [
        (zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), source.read_bytes())
        for path, source in files
    ]
    for info, _ in added:
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    for info, data in kept + added:
        writer.writerow([info.filename, record_hash(data), len(data)])
    writer.writerow([record_name, "", ""])
    partial = wheel.with_name(wheel.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for info, data in kept + added:
            target.writestr(info, data)
        target.writestr(zipfile.ZipInfo(record_name, date_time=(1980, 1, 1, 0, 0, 0)), rows.getvalue())
    partial.replace(wheel)


# ---- the PEP 517 hooks: maturin's, with the backends added to every wheel ----------------------

get_requires_for_build_wheel = maturin.get_requires_for_build_wheel
get_requires_for_build_sdist = maturin.get_requires_for_build_sdist
prepare_metadata_for_build_wheel = maturin.prepare_metadata_for_build_wheel
build_sdist = maturin.build_sdist


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Mapping[str, object]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """maturin's wheel, then the built-in backends added to it."""
    name = maturin.build_wheel(wheel_directory, config_settings, metadata_directory)
    add_to_wheel(Path(wheel_directory) / name, backend_files())
    return name
