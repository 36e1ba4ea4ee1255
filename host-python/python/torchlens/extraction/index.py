"""The folder's two JSON files. ``job.json`` is written first and names the job (model, selector,
batch size), so a rerun with the same ``out=`` knows the shards it finds are its own.
``index.json`` is written last, once every shard is on disk: the shards in row order, their row
counts and checksums, and each op's dtype and row shape. Both are written to a temporary file
and renamed, so neither is ever half-written; neither holds a time or a host name, so the same
job gives the same bytes on any engine."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from ..atomic_file import atomic_file
from ..errors import ExtractionError
from .shards import ShardRecord

INDEX_NAME = "index.json"
JOB_NAME = "job.json"
FORMAT = "torchlens-extraction"
FORMAT_VERSION = 1
#: Name prefixes of the temporary files shards and JSON files are written to before their rename.
TEMPORARY_PREFIXES = (".tlspec-", ".json-")


def job_description(
    model: str, selector: Any, batch_size: int, backend: Optional[str], inputs: Any
) -> Dict[str, Any]:
    """What identifies a job: a rerun must describe itself the same way to resume."""
    return {
        "model": model,
        "selector": repr(selector),
        "batch_size": batch_size,
        "backend": backend,
        "inputs": None if inputs is None else _callable_name(inputs),
    }


def _callable_name(value: Any) -> str:
    module = getattr(value, "__module__", None) or type(value).__module__
    return f"{module}.{getattr(value, '__qualname__', type(value).__qualname__)}"


def claim_out(out: str, job: Dict[str, Any]) -> None:
    """Creates ``out`` and its ``job.json``, or checks that the one there is this job's. The
    temporary files a crashed run left (never under a final name) are removed."""
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, JOB_NAME)
    if os.path.exists(path):
        found = read_json(path, "job")
        has_shards = any(name.startswith("shard-") for name in os.listdir(out))
        if found.get("job") != job and not has_shards:
            # A job that failed before its first shard (a selector that matched nothing, say)
            # leaves nothing to protect: the corrected job takes the folder over.
            write_json_atomically(path, {"format": FORMAT, "format_version": FORMAT_VERSION, "job": job})
        elif found.get("job") != job:
            raise ExtractionError(
                f"{out} holds another extraction job ({found.get('job')}), not this one ({job})",
                "extraction_out_other_job",
                "pass a new out= folder, or delete the old one to start again",
            )
        for name in os.listdir(out):
            if name.endswith(".partial") and name.startswith(TEMPORARY_PREFIXES):
                os.unlink(os.path.join(out, name))
        return
    write_json_atomically(path, {"format": FORMAT, "format_version": FORMAT_VERSION, "job": job})


def build_index(job: Dict[str, Any], records: List[ShardRecord]) -> Dict[str, Any]:
    """The index of a finished job; every shard must hold the same ops, dtypes and row shapes."""
    columns: Dict[str, Dict[str, Any]] = {}
    shards = []
    row_start = 0
    for record in records:
        layout = {
            label: {"dtype": c["dtype"], "row_shape": c["row_shape"]} for label, c in record.columns.items()
        }
        if not shards:
            columns = layout
        elif layout != columns:
            raise ExtractionError(
                f"shard {record.index} holds {layout}, the first shard {columns}",
                "extraction_columns_changed",
                "batches must give the selected ops the same labels, dtypes and shapes after the row "
                "dimension (pad inputs to one shape, or select ops that do not depend on it)",
            )
        entry = record.as_json()
        entry["row_start"] = row_start
        entry["crc32"] = {label: c["crc32"] for label, c in record.columns.items()}
        del entry["columns"]
        shards.append(entry)
        row_start += record.rows
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "job": job,
        "backend": records[0].backend if records else None,
        "rows": row_start,
        "columns": columns,
        "shards": shards,
    }


def write_index(out: str, index: Dict[str, Any]) -> None:
    write_json_atomically(os.path.join(out, INDEX_NAME), index)


def write_json_atomically(path: str, value: Dict[str, Any]) -> None:
    """Sorted keys and fixed indentation (the bytes depend only on the value), to a temporary
    file in the same folder, fsynced, then renamed."""
    text = json.dumps(value, sort_keys=True, indent=1) + "\n"
    with atomic_file(path, "w", prefix=".json-") as stream:
        stream.write(text)


def read_json(path: str, what: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as stream:
            value = json.load(stream)
    except FileNotFoundError as error:
        raise ExtractionError(
            f"{path} does not exist",
            f"extraction_{what}_missing",
            "pass the out= folder of a finished tl.extract_dataset (the index is written last; "
            "rerun the extraction to finish an interrupted one)",
        ) from error
    except ValueError as error:
        raise ExtractionError(
            f"{path} is not JSON", f"extraction_{what}_invalid", "rerun tl.extract_dataset with the same out="
        ) from error
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise ExtractionError(
            f"{path} is not a TorchLens extraction {what}",
            f"extraction_{what}_invalid",
            "pass the out= folder of tl.extract_dataset",
        )
    if value.get("format_version") != FORMAT_VERSION:
        raise ExtractionError(
            f"{path} has format version {value.get('format_version')}, this TorchLens reads {FORMAT_VERSION}",
            "extraction_version_unsupported",
            "read it with the TorchLens version that wrote it, or extract again",
        )
    return value


def read_index(out: str) -> Dict[str, Any]:
    """The index of a finished extraction folder."""
    return read_json(os.path.join(out, INDEX_NAME), "index")
