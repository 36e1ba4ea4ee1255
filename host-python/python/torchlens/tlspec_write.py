"""Writing ``.tlspec`` files: ``trace.save`` and the streamed capture's writer. The core lays
out the file; this module moves the bytes, straight from the arrays' buffers. It needs the trace
only as the object it writes (never the class), so :mod:`torchlens.trace` imports it; reading a
file back into a trace is :mod:`torchlens.tlspec_io`."""

from __future__ import annotations

import datetime
import json
import mmap
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Sequence, Tuple

from .atomic_file import atomic_file
from .backward import GRAD_SLOT_BASE
from .errors import TlspecFormatError, UnsupportedError
from .payload_sink import PayloadSink

if TYPE_CHECKING:
    from .trace import Trace


#: The ways ``trace.save`` writes source file paths (the core rewrites them; see
#: docs/tlspec-format.md).
SOURCE_PATH_MODES = ("relative", "absolute", "none")


def save(
    trace: Trace,
    path: str,
    source_paths: str = "relative",
    extra: Sequence[Tuple[str, str]] = (),
    phase_seconds: Optional[Dict[str, float]] = None,
) -> None:
    """Writes ``trace`` to ``path`` atomically: a temporary file in the same folder, fsync, rename.
    A failed save leaves any existing file untouched. ``source_paths`` is one of
    :data:`SOURCE_PATH_MODES`; ``extra`` adds string facts to the manifest (dataset extraction
    records each shard's place in the job there). ``phase_seconds``, when given, receives how
    long each phase took (``encode``, ``write_and_crc``, ``fsync``, ``rename``)."""
    backend = trace._backend

    def write_payload(sink: PayloadSink, slot: int) -> None:
        # A value that is not contiguous on the host becomes one contiguous copy here, released
        # when this returns (the sink is done with its bytes by then).
        sink.write(backend.payload_bytes(_placed_value(trace, slot)))

    write_tlspec(trace, path, source_paths, write_payload, extra, phase_seconds)


def write_tlspec(
    trace: Trace,
    path: str,
    source_paths: str,
    write_payload: Callable[[PayloadSink, int], None],
    extra: Sequence[Tuple[str, str]] = (),
    phase_seconds: Optional[Dict[str, float]] = None,
) -> Tuple[dict, list]:
    """Writes ``trace``'s file in one pass with payloads from any source: ``write_payload(sink,
    slot)`` appends a kept payload's bytes to the :class:`~torchlens.payload_sink.PayloadSink`
    (from memory for ``trace.save``, from a spool for a streamed capture); the sink checksums
    them as they are written, and the payload CRC-32 table the core placed after the payloads
    is written last. Atomic as :func:`save`; returns the manifest written and the core's payload
    placements (op, slot, label, offset, length, dtype)."""
    if source_paths not in SOURCE_PATH_MODES:
        raise UnsupportedError(
            f"source_paths={source_paths!r} is not one of {', '.join(SOURCE_PATH_MODES)}",
            "tlspec_source_paths_invalid",
            'pass source_paths="relative", "absolute" or "none"',
        )
    phases = {} if phase_seconds is None else phase_seconds
    started = time.perf_counter()
    backend = trace._backend
    trace._sync_backward()
    manifest = {
        "backend": backend.name,
        "backend_runtime": backend.runtime_name(),
        "backend_version": backend.runtime_version(),
        "payload_policy": "array_payloads",
        "save_level": _save_level(trace),
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "codec_metadata": json.dumps(backend.codec_metadata(trace), sort_keys=True),
        # No checksums up front: the core places the payload CRC-32 table after the payloads,
        # and the sink fills it while writing them.
        "payload_checksums": [],
        "extra": [("source_paths", source_paths), *extra],
    }
    try:
        prefix, placements, crc_table_offset, file_length = trace._native.encode(manifest)
    except UnsupportedError as error:
        if error.code == "tlspec_payload_dtype_unsupported":
            _raise_backend_refusal(trace)
        raise
    phases["encode"] = time.perf_counter() - started
    with atomic_file(path, buffering=0, phase_seconds=phases) as out:
        started = time.perf_counter()
        with PayloadSink(out.fileno(), 0) as sink:
            sink.write_raw(prefix)
            for _op, slot, label, offset, length, _dtype in placements:
                at = sink.position
                write_payload(sink, slot)
                written, _crc = sink.finish_payload()
                if written != length or at != offset:
                    raise TlspecFormatError(
                        f"payload {label} has {written} bytes at {at}, "
                        f"the layout expects {length} at {offset}",
                        "tlspec_payload_length_mismatch",
                        "report this as a bug in the backend's payload codec",
                    )
            if crc_table_offset is not None:
                if sink.position != crc_table_offset:
                    raise TlspecFormatError(
                        f"the payloads end at {sink.position}, the layout puts the CRC-32 table at "
                        f"{crc_table_offset}",
                        "tlspec_length_mismatch",
                        "report this as a bug",
                    )
                sink.write_raw(sink.crc_table())
            if sink.position != file_length:
                raise TlspecFormatError(
                    f"wrote {sink.position} bytes, the layout expects {file_length}",
                    "tlspec_length_mismatch",
                    "report this as a bug",
                )
        phases["write_and_crc"] = time.perf_counter() - started
    return manifest, placements


def _raise_backend_refusal(trace: Trace) -> None:
    """The core refused a payload's dtype: the backend's codec, when it refuses the value itself,
    says more precisely why and what to do (``tf_payload_unencodable`` for a string tensor), so
    its refusal is raised instead. Nothing has been written yet."""
    backend = trace._backend
    for slot in list(trace._payloads):
        backend.payload_bytes(_placed_value(trace, slot))


def _save_level(trace: Trace) -> str:
    """``all`` when every op but the outputs kept its own value, else ``selected``. Counted from
    the trace's totals rather than read op by op: building every op's record costs tens of
    microseconds per op, seconds on a 100,000-op trace."""
    info = trace.info
    return "all" if len(trace._payloads) >= info["op_count"] - len(info["outputs"]) else "selected"


def _placed_value(trace: Trace, slot: int) -> Any:
    """The value the core placed under ``slot``: an op's payload, or a saved gradient."""
    if slot >= GRAD_SLOT_BASE and trace.backward is not None:
        return trace.backward.grad_of(slot - GRAD_SLOT_BASE)
    return trace._payload(slot)


def map_payloads(path: str, backend: Any, placements: list) -> dict:
    """The payloads of a file just written, by the writer's slots, as zero-copy arrays over a
    private memory map (as ``tl.load`` gives them)."""
    if not placements:
        return {}
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    return {
        slot: backend.payload_from_buffer(mapped, offset, length, dtype, shape)
        for slot, offset, length, dtype, shape in placements
    }
