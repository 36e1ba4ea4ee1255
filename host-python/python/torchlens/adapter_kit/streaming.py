"""Streaming saves (``tl.trace(..., streaming=StreamingOptions(path=...))``): every payload the
capture keeps is written to a spool file beside the target as it is held, and released at once,
so a capture's memory stays near one op's values instead of growing with every saved value.

A ``.tlspec`` cannot be written front to back while the forward runs: its header and body (the
trace itself) come first and are known only at the end. So the payload bytes go to the spool in
arrival order, with their CRC-32 computed in the same pass; when the forward returns, the core
lays the file out, the host writes header and body, copies each kept payload from the spool in
the kernel (``copy_file_range``: no second copy in memory), writes the payload CRC-32 table
from the checksums the spool already holds, fsyncs and renames the file into place. The spool
is deleted on success, on an exception and on abort; a process killed mid-run leaves at most a
hidden ``.tlspec-*.spool`` beside the target, never a file under its name.

The spool is the session's payload mapping: the session and the adapter hold, replace and drop
values through it as through the plain dict they use otherwise."""

from __future__ import annotations

import os
import tempfile
import zlib
from collections.abc import MutableMapping
from typing import Any, Callable, Dict, Iterator, NamedTuple

from ..tlspec_write import map_payloads, write_tlspec


class SpooledPayload(NamedTuple):
    """Where one held value's bytes lie in the spool."""

    offset: int
    length: int
    crc32: int


class PayloadSpool(MutableMapping):
    """Value id → :class:`SpooledPayload`: assigning a value writes its bytes (``encode`` gives
    them, as ``trace.save`` would write them) and keeps only their place. A replaced or dropped
    value's bytes stay in the spool, unreferenced; only kept values reach the final file."""

    def __init__(self, target: str, encode: Callable[[Any], memoryview]) -> None:
        self.target = os.path.abspath(target)
        self._encode = encode
        directory = os.path.dirname(self.target)
        handle, self.spool_path = tempfile.mkstemp(prefix=".tlspec-", suffix=".spool", dir=directory)
        self._file = os.fdopen(handle, "w+b")
        self._entries: Dict[int, SpooledPayload] = {}
        self._end = 0

    # ---- the mapping the session writes through -----------------------------------------------

    def __setitem__(self, value_id: int, value: Any) -> None:
        data = self._encode(value)
        written = self._file.write(data)
        self._entries[value_id] = SpooledPayload(self._end, written, zlib.crc32(data))
        self._end += written

    def __getitem__(self, value_id: int) -> SpooledPayload:
        return self._entries[value_id]

    def __delitem__(self, value_id: int) -> None:
        del self._entries[value_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    # ---- the end ------------------------------------------------------------------------------

    def write_into(self, sink: Any, value_id: int) -> None:
        """Appends a held value's bytes to the final file through ``sink`` (a
        :class:`~torchlens.payload_sink.PayloadSink`): copied from the spool in the kernel, with
        the CRC-32 computed when they were spooled."""
        entry = self._entries[value_id]
        self._file.flush()
        sink.copy(self._file.fileno(), entry.offset, entry.length, entry.crc32)

    def discard(self) -> None:
        """Closes and deletes the spool (after the final file is written, or on failure)."""
        self._entries.clear()
        if not self._file.closed:
            self._file.close()
        try:
            os.unlink(self.spool_path)
        except OSError:
            pass


def finish_streamed(trace: Any, spool: PayloadSpool, source_paths: str) -> None:
    """Writes the streamed trace's file from the spool, renames it into place, and points the
    trace's payloads at the new file (lazy, memory-mapped, as ``tl.load`` gives them)."""
    try:
        _, placements = write_tlspec(trace, spool.target, source_paths, spool.write_into)
    finally:
        spool.discard()
    shapes = {op.label: op.shape for op in trace.ops}
    kept = [(slot, at, length, dtype, shapes[label]) for _, slot, label, at, length, dtype in placements]
    trace._payloads = map_payloads(spool.target, trace._backend, kept)
    # The values now come from the file: a guard written for in-memory aliases has nothing to check.
    trace._payload_guard = None
