"""One shard: the trace of one batch, saved as a ``.tlspec`` (a safetensors file) whose
payloads include the selected ops' values with the batch's rows as their first dimension.

``trace.save`` writes to a temporary file in the same folder, fsyncs and renames it, so a shard
exists under its final name only once complete. The manifest's ``extraction_shard`` entry
records the shard's place in the job; a shard's record is always read back from the file, so a
shard made now and one a rerun finds are described by the same code."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .. import api, tlspec_io
from ..errors import ExtractionError, TlspecFormatError
from .inference import inference_context

#: The manifest key of a shard's place in the job.
SHARD_METADATA_KEY = "extraction_shard"

#: Headers larger than this are refused before they are read (a damaged length field).
_MAX_HEADER_BYTES = 256 * 1024 * 1024


def shard_name(index: int) -> str:
    """The file name of shard ``index`` (zero-padded, so names sort in row order)."""
    return f"shard-{index:06d}.tlspec"


@dataclass
class ShardRecord:
    """What the index says of one shard."""

    index: int
    file: str
    rows: int
    input_crc32: int
    #: label -> {"dtype": logical dtype, "row_shape": [...], "crc32": payload CRC-32}
    columns: Dict[str, Dict[str, Any]]
    #: The backend that traced it (the manifest's ``backend``).
    backend: str

    def as_json(self) -> Dict[str, Any]:
        return {
            "file": self.file,
            "index": self.index,
            "rows": self.rows,
            "input_crc32": self.input_crc32,
            "columns": self.columns,
        }


def extract_shard(
    model: Any,
    args: tuple,
    kwargs: Dict[str, Any],
    selector: Any,
    backend: Optional[str],
    out: str,
    index: int,
    digest: int,
) -> ShardRecord:
    """Traces one batch with selective capture and writes it as shard ``index`` of ``out``."""
    with inference_context(model):
        trace = api.trace(model, args, kwargs, backend=backend, save=selector)
    columns = [op for op in trace.select(selector) if op.saved]
    if not columns:
        raise ExtractionError(
            f"the selector {selector!r} kept no value in batch {index}",
            "extraction_selector_empty",
            "check the labels with tl.trace(model, x).summary() and pass a selector that matches ops",
        )
    rows = None
    for op in columns:
        shape = list(op.shape)
        if not shape or (rows is not None and shape[0] != rows):
            raise ExtractionError(
                f"op {op.label} has shape {shape}, which has no leading row dimension of the batch "
                f"(other selected ops have {rows} rows)",
                "extraction_column_not_rows",
                "select ops whose first dimension is the batch (not parameters, buffers or reductions "
                "over the batch)",
            )
        rows = shape[0]
    place = {"index": index, "rows": rows, "input_crc32": digest, "columns": [op.label for op in columns]}
    path = os.path.join(out, shard_name(index))
    tlspec_io.save(trace, path, extra=[(SHARD_METADATA_KEY, json.dumps(place, sort_keys=True))])
    return read_shard(out, index)


def read_header(path: str) -> Dict[str, Any]:
    """The safetensors header of a shard (JSON), without reading its payloads."""
    with open(path, "rb") as handle:
        first = handle.read(8)
        if len(first) != 8:
            raise _damaged(path, "it is shorter than a safetensors length field")
        (length,) = struct.unpack("<Q", first)
        if length > _MAX_HEADER_BYTES or length > os.fstat(handle.fileno()).st_size - 8:
            raise _damaged(path, f"its header length {length} does not fit the file")
        try:
            header = json.loads(handle.read(length))
        except ValueError as error:
            raise _damaged(path, "its header is not JSON") from error
    if not isinstance(header, dict):
        raise _damaged(path, "its header is not a JSON object")
    header["__header_length__"] = length
    return header


def read_shard(out: str, index: int) -> ShardRecord:
    """The record of shard ``index`` of ``out``, from its header."""
    name = shard_name(index)
    path = os.path.join(out, name)
    header = read_header(path)
    metadata = header.get("__metadata__") or {}
    try:
        place = json.loads(metadata[SHARD_METADATA_KEY])
        dtypes = json.loads(metadata["logical_dtypes"])
        labels: List[str] = list(place["columns"])
        rows = int(place["rows"])
    except (KeyError, ValueError, TypeError) as error:
        raise _damaged(path, "its manifest lacks the extraction entries") from error
    if place.get("index") != index:
        raise _damaged(path, f"its manifest says it is shard {place.get('index')}")
    checksums = _payload_checksums(path)
    columns = {}
    for label in labels:
        entry = header.get(label)
        if not isinstance(entry, dict) or label not in dtypes or label not in checksums:
            raise _damaged(path, f"it has no payload for its column {label}")
        shape = list(entry["shape"])
        if not shape or shape[0] != rows:
            raise _damaged(path, f"its payload {label} has shape {shape}, not {rows} rows")
        columns[label] = {"dtype": dtypes[label], "row_shape": shape[1:], "crc32": int(checksums[label])}
    return ShardRecord(
        index, name, rows, int(place["input_crc32"]), columns, str(metadata.get("backend", ""))
    )


def _payload_checksums(path: str) -> Dict[str, int]:
    """Each payload's recorded CRC-32 (from the file's CRC-32 table, or the manifest of a shard
    written before it), the header checked by the core."""
    try:
        return tlspec_io.payload_crc32s(path)
    except TlspecFormatError as error:
        raise _damaged(path, f"its header is damaged ({error.code})") from error


def _damaged(path: str, why: str) -> ExtractionError:
    return ExtractionError(
        f"{path} is not a shard of a TorchLens extraction: {why}",
        "extraction_shard_invalid",
        "delete the file (a rerun with the same out= writes it again), or use a new out= folder",
    )
