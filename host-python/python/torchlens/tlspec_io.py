"""Writing and reading ``.tlspec`` files. The core lays out and checks the file; this module
moves the bytes: payloads are written straight from the arrays' buffers (the writer is
:mod:`torchlens.tlspec_write`, which ``trace.save`` uses; its entry points are named here too) and
read back as zero-copy views of a memory map, made into framework arrays only when first read
(:mod:`torchlens.lazy_payloads`): a file opens without importing its framework."""

from __future__ import annotations

import json
import mmap
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from . import terminal_text
from ._core import core
from ._hosts import active
from .backends import find_spec, get_backend, get_spec
from .backward import GRAD_TENSOR_PREFIX, from_core_json
from .collector_pause import collector_paused
from .errors import InvalidTraceError, LimitExceededError, TlspecFormatError
from .lazy_payloads import DeferredBackend, LazyPayloads, PayloadSource
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
    path: str,
    backend: Any = None,
    hints: Optional[PayloadLoadHints] = None,
    verify: bool = False,
    untrusted: bool = False,
    in_memory: Optional[bool] = None,
) -> Trace:
    """Opens a ``.tlspec``. The core checks the header and the trace body (and, in format
    version 2, their checksums) before anything is sized; payloads become zero-copy arrays over
    a private memory map of the file. ``verify=True`` also reads every payload and checks it
    against the CRC-32 its writer recorded (``tlspec_payload_checksum_mismatch``).

    ``backend``: the backend the caller expects (a name or alias, like ``"torch"``). A file
    whose manifest names another one is refused (``tlspec_backend_mismatch``) before any
    framework is imported, so a relabelled file cannot choose which framework reads it.
    Unset, the manifest's backend reads the payloads.

    ``untrusted=True``, for files from anyone: the core runs in an instance of its own under the
    CLI's limits (512 MiB of memory, a fuel budget and a 30 s deadline per call; a file that
    needs more is refused with ``sandbox_memory_exhausted``, ``sandbox_fuel_exhausted`` or
    ``sandbox_deadline_exceeded``), and payloads are read into private memory.

    ``in_memory=True`` (the default with ``untrusted=True``) copies the payload bytes into
    private memory at load instead of mapping the file: whatever happens to the file afterwards
    (another process truncating or rewriting it) cannot reach the trace, and ``verify=True``
    checks exactly the bytes the trace hands back. Mapped (the default otherwise), payloads are
    views of a copy-on-write map: cheap for large files. A file that shrank before a payload's
    view is made is ``tlspec_file_changed``, but one truncated after ends the process with
    SIGBUS when that view is touched (a signal Python cannot turn into an exception); load
    files other processes may change with ``in_memory=True``.

    Any file it cannot read raises :class:`~torchlens.errors.TlspecFormatError` (or its
    subclass ``TlspecVersionError``), with the core's stable code."""
    if in_memory is None:
        in_memory = untrusted
    try:
        # A large trace's ops arrive as many small objects at once (see collector_pause).
        with collector_paused():
            return _load(path, backend, hints, verify, untrusted, in_memory)
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


def _resolve_backend(expected: Any, named: str) -> Any:
    """The backend that reads a file whose manifest names ``named``: ``expected`` when the
    caller pinned one (refusing a file that names another), else the named one; as its
    registered name (nothing imported), or the protocol object the caller passed."""
    if expected is not None and not isinstance(expected, str):
        return expected  # a protocol object the caller chose itself
    if not named:
        raise TlspecFormatError(
            "the file's manifest names no backend, so its payloads cannot be decoded",
            "tlspec_backend_missing",
            "save the trace again with this TorchLens (it records the backend)",
        )
    if expected is None:
        return get_spec(named).name
    pinned = get_spec(expected)
    recorded = find_spec(named)
    if recorded is None or recorded.name != pinned.name:
        raise TlspecFormatError(
            f"the file says it holds a {terminal_text.shown(named)!r} trace, and backend="
            f"{expected!r} was asked for",
            "tlspec_backend_mismatch",
            f"load it with backend={named!r} if you expect a {named} trace, or leave backend unset",
        )
    return pinned.name


def _private_copy(handle: Any, file_length: int) -> bytearray:
    """The whole file in private memory (``in_memory=True``): payload offsets stay absolute."""
    copy = bytearray(file_length)
    view = memoryview(copy)
    read = 0
    while read < file_length:
        count = handle.readinto(view[read:])
        if not count:
            raise TlspecFormatError(
                f"the file shrank while it was read ({read} of {file_length} bytes)",
                "tlspec_truncated",
                "another process is changing the file; load it again once it is written",
            )
        read += count
    return copy


def _load(
    path: str,
    backend: Any,
    hints: Optional[PayloadLoadHints],
    verify: bool = False,
    untrusted: bool = False,
    in_memory: bool = False,
) -> Trace:
    with open(path, "rb") as handle:
        file_length = os.fstat(handle.fileno()).st_size
        first = handle.read(8)
        native_core = active().untrusted_core() if untrusted else core()
        header_length = native_core.tlspec_header_length(first)
        header = first + handle.read(header_length)
        info = native_core.parse_tlspec_header(header, file_length)
        handle.seek(info["body_offset"])
        body = handle.read(info["body_length"])
        info, native = native_core.decode_tlspec(header, body, file_length)
        # Chosen (or refused) once the core has checked the header against its checksum, and
        # before any framework is imported or any payload is touched.
        backend = _resolve_backend(backend, info["manifest"]["backend"])
        payloads = {}
        if info["payloads"] and in_memory:
            handle.seek(0)
            mapped: Any = _private_copy(handle, file_length)
        elif info["payloads"]:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
        else:
            mapped = None
        if mapped is not None and verify:
            _verify_payloads(mapped, info)
    backward_json = native.backward_json()
    # Every op record crosses from the core into Python only when something here needs them
    # (payload shapes, gradient labels): a file without either opens without them, and
    # ``trace.ops`` reads them on first use (a 100,002-op file: 1.2 s → 0.1 s).
    ops = native.ops() if info["payloads"] or backward_json is not None else []
    logical_shapes = {op["label"]: op["shape"] for op in ops}
    labels = {}
    sources = {}
    for slot, (label, dtype, _storage, _shape, offset, length) in enumerate(info["payloads"]):
        # A saved gradient (``grad/<op label>``) has its op's shape.
        shape = logical_shapes[
            label[len(GRAD_TENSOR_PREFIX) :] if label.startswith(GRAD_TENSOR_PREFIX) else label
        ]
        sources[slot] = PayloadSource(mapped, offset, length, dtype, shape)
        labels[slot] = label
    try:
        # The core bounded it (size and nesting, checked before any parse; a JSON object).
        codec = json.loads(info["manifest"]["codec_metadata"] or "{}")
    except (ValueError, RecursionError) as error:
        raise TlspecFormatError(
            "the manifest's codec_metadata is not JSON",
            "tlspec_codec_metadata_invalid",
            "the file is corrupted; save the trace again",
        ) from error
    codec = codec if isinstance(codec, dict) else {}
    has_grads = any(label.startswith(GRAD_TENSOR_PREFIX) for label in labels.values())
    if isinstance(backend, str) and not codec and hints is None and not has_grads:
        # Nothing to rebuild at load (typed keys, shardings, gradients): the framework is
        # imported only when a value is first read as its array.
        backend = DeferredBackend(get_spec(backend))
        payloads = LazyPayloads(backend, sources)
        status = {label: "value" for label in labels.values()}
    else:
        if isinstance(backend, str):
            backend = get_backend(backend)
        for slot, source in sources.items():
            payloads[slot] = backend.payload_from_buffer(*source)
        status = backend.finish_load(payloads, labels, codec, hints)
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
