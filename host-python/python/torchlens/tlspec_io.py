"""Writing and reading ``.tlspec`` files. The core lays out and checks the file; this module
moves the bytes: payloads are written straight from the arrays' buffers (the writer is
:mod:`torchlens.tlspec_write`, which ``trace.save`` uses; its entry points are named here too) and
read back as zero-copy views of a memory map."""

from __future__ import annotations

import json
import mmap
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from ._core import core
from .backends import get_backend
from .backward import GRAD_TENSOR_PREFIX, from_core_json
from .collector_pause import collector_paused
from .errors import InvalidTraceError, LimitExceededError, TlspecFormatError
from .tlspec_write import SOURCE_PATH_MODES, map_payloads, save, write_tlspec
from .trace import Op, Trace

__all__ = [
    "SOURCE_PATH_MODES",
    "PayloadLoadHints",
    "load",
    "map_payloads",
    "payload_crc32s",
    "recorded_crc32s",
    "save",
    "write_tlspec",
]


@dataclass(frozen=True)
class PayloadLoadHints:
    """Per-backend hints for how ``tl.load`` materializes payloads (``jax=JaxPayloadLoadHint(...)``).
    Without hints every payload loads as a plain single-device value."""

    jax: Any = None


def load(
    path: str, backend: Any = None, hints: Optional[PayloadLoadHints] = None, verify: bool = False
) -> Trace:
    """Opens a ``.tlspec``. The core checks the header and the trace body (and, in format
    version 2, their checksums) before anything is sized; payloads become zero-copy arrays over
    a private memory map of the file. ``verify=True`` also reads every payload and checks it
    against the CRC-32 its writer recorded (``tlspec_payload_checksum_mismatch``).

    Any file it cannot read raises :class:`~torchlens.errors.TlspecFormatError` (or its
    subclass ``TlspecVersionError``), with the core's stable code."""
    try:
        # A large trace's ops arrive as many small objects at once (see collector_pause).
        with collector_paused():
            return _load(path, backend, hints, verify)
    except (LimitExceededError, InvalidTraceError) as error:
        raise TlspecFormatError(error.message, error.code, error.remedy) from error


def recorded_crc32s(info: dict, read: Callable[[int, int], Any]) -> Dict[str, int]:
    """The CRC-32 each payload's writer recorded, by label, for a file whose header the core
    parsed (``info``): from the payload CRC-32 table (``read(offset, length)`` reads file
    bytes), or, in files written before the table, the manifest's ``payload_crc32``; empty when
    the file records none."""
    offset = info.get("crc_table_offset")
    if offset is None:
        return dict(info["manifest"]["payload_checksums"])
    labels = [entry[0] for entry in info["payloads"]]
    table = bytes(read(offset, 4 * len(labels)))
    if len(table) != 4 * len(labels):
        raise TlspecFormatError(
            "the file ends inside its payload CRC-32 table",
            "tlspec_truncated",
            "the file is damaged; save the trace again from its source",
        )
    return dict(zip(labels, struct.unpack(f"<{len(labels)}I", table)))


def payload_crc32s(path: str) -> Dict[str, int]:
    """The CRC-32 each payload of the ``.tlspec`` at ``path`` was recorded with, by label (the
    header is checked by the core; no payload is read). A file it cannot read raises
    :class:`~torchlens.errors.TlspecFormatError`, as :func:`load` does."""
    try:
        with open(path, "rb") as handle:
            file_length = os.fstat(handle.fileno()).st_size
            first = handle.read(8)
            native_core = core()
            header = first + handle.read(native_core.tlspec_header_length(first))
            info = native_core.parse_tlspec_header(header, file_length)
            return recorded_crc32s(info, lambda offset, length: os.pread(handle.fileno(), length, offset))
    except (LimitExceededError, InvalidTraceError) as error:
        raise TlspecFormatError(error.message, error.code, error.remedy) from error


def _verify_payloads(mapped: Any, info: dict) -> None:
    """Every payload's bytes against the CRC-32 its writer recorded for it."""
    view = memoryview(mapped)
    recorded = recorded_crc32s(info, lambda offset, length: view[offset : offset + length])
    for label, _dtype, _storage, _shape, offset, length in info["payloads"]:
        expected = recorded.get(label)
        if expected is None:
            raise TlspecFormatError(
                f"payload {label} has no recorded CRC-32, so it cannot be verified",
                "tlspec_payload_checksum_missing",
                "load without verify=True, or save the trace again with this TorchLens",
            )
        actual = zlib.crc32(view[offset : offset + length])
        if actual != expected:
            raise TlspecFormatError(
                f"payload {label} has CRC-32 {actual:08x}, the file recorded {expected:08x}",
                "tlspec_payload_checksum_mismatch",
                "the file is damaged; save the trace again from its source",
            )


def _load(path: str, backend: Any, hints: Optional[PayloadLoadHints], verify: bool = False) -> Trace:
    with open(path, "rb") as handle:
        file_length = os.fstat(handle.fileno()).st_size
        first = handle.read(8)
        native_core = core()
        header_length = native_core.tlspec_header_length(first)
        header = first + handle.read(header_length)
        info = native_core.parse_tlspec_header(header, file_length)
        handle.seek(info["body_offset"])
        body = handle.read(info["body_length"])
        info, native = native_core.decode_tlspec(header, body, file_length)
        payloads = {}
        if info["payloads"]:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
            if verify:
                _verify_payloads(mapped, info)
        else:
            mapped = None
    if backend is None:
        name = info["manifest"]["backend"]
        if not name:
            raise TlspecFormatError(
                "the file's manifest names no backend, so its payloads cannot be decoded",
                "tlspec_backend_missing",
                "save the trace again with this TorchLens (it records the backend)",
            )
        backend = get_backend(name)
    backward_json = native.backward_json()
    # Every op record crosses from the core into Python only when something here needs them
    # (payload shapes, gradient labels): a file without either opens without them, and
    # ``trace.ops`` reads them on first use (a 100,002-op file: 1.2 s → 0.1 s).
    ops = native.ops() if info["payloads"] or backward_json is not None else []
    logical_shapes = {op["label"]: op["shape"] for op in ops}
    labels = {}
    for slot, (label, dtype, _storage, _shape, offset, length) in enumerate(info["payloads"]):
        # A saved gradient (``grad/<op label>``) has its op's shape.
        shape = logical_shapes[
            label[len(GRAD_TENSOR_PREFIX) :] if label.startswith(GRAD_TENSOR_PREFIX) else label
        ]
        payloads[slot] = backend.payload_from_buffer(mapped, offset, length, dtype, shape)
        labels[slot] = label
    try:
        codec = json.loads(info["manifest"]["codec_metadata"] or "{}")
    except ValueError as error:
        raise TlspecFormatError(
            "the manifest's codec_metadata is not JSON",
            "tlspec_codec_metadata_invalid",
            "the file is corrupted; save the trace again",
        ) from error
    status = backend.finish_load(payloads, labels, codec if isinstance(codec, dict) else {}, hints)
    grads = {}
    if backward_json is not None:
        index_of = {op["label"]: op["id"] for op in ops}
        for slot, label in list(labels.items()):
            if label.startswith(GRAD_TENSOR_PREFIX):
                grads[index_of[label[len(GRAD_TENSOR_PREFIX) :]]] = payloads.pop(slot)
    trace = Trace(native, payloads, backend, info["manifest"])
    if ops:
        # The op records were read above: the trace keeps them instead of reading them again.
        trace._ops = [Op(trace._core, op) for op in ops]
    trace.payload_load_status = status
    if backward_json is not None:
        trace.backward = from_core_json(backward_json, [op["label"] for op in ops], grads)
    return trace
