"""Appending a ``.tlspec``'s payloads to its file in one pass, each payload's CRC-32 computed
while it is written.

The payload CRC-32 table comes after the payloads (docs/tlspec-format.md, section 2.1), so
nothing has to be read twice: the main thread writes a payload in chunks of a few MB with
``os.write`` straight from the value's buffer (no copy), and a worker thread computes the
CRC-32 of the chunk being written at the same time. ``os.write`` and ``zlib.crc32`` both
release the GIL, so on two cores the checksum costs almost nothing on top of the write. The
two move in lock step, one chunk at a time: when :meth:`PayloadSink.write` returns, nothing
refers to the bytes any more, so a temporary contiguous copy (a non-contiguous tensor's) can be
released before the next payload's is made.

A third thread asks the kernel (``sync_file_range`` on Linux) to start writing back what is
already in the file, every 32 MB, so the final ``fsync`` finds most of the file on disk
already instead of writing all of it then. It has a thread of its own because the call blocks
while the disk's queue is full: the write and the checksum never wait for it."""

from __future__ import annotations

import ctypes
import os
import queue
import struct
import threading
import zlib
from typing import Any, Callable, List, Optional, Tuple

#: Bytes written (and checksummed) per step. A few MB: large sequential writes, few hand-offs
#: between the threads, and a small window of bytes in flight.
CHUNK_BYTES = 4 << 20

#: Smaller chunks are checksummed on the main thread: handing them over costs more than it
#: saves.
PARALLEL_MIN_BYTES = 256 << 10

#: Start writing back after this many new bytes (``sync_file_range``, where the OS has it).
WRITEBACK_STEP_BYTES = 32 << 20


class PayloadSink:
    """Appends payloads to the open file ``fd`` from byte ``position`` (its current offset)
    and records each one's length and CRC-32. Use as a context manager: the worker thread
    stops on exit."""

    def __init__(self, fd: int, position: int) -> None:
        self._fd = fd
        self.position = position
        #: (length, CRC-32) of every finished payload, in file order.
        self.finished: List[Tuple[int, int]] = []
        self._length = 0
        self._crc = 0
        self._jobs: queue.SimpleQueue[Optional[Tuple[memoryview, int]]] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._checksum_chunks, name="torchlens-crc32", daemon=True)
        self._worker.start()
        self._writeback = _Writeback(fd, position) if _writeback_function() is not None else None

    def __enter__(self) -> PayloadSink:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stops the worker threads (idempotent); returns once neither uses the file."""
        if self._worker.is_alive():
            self._jobs.put(None)
            self._worker.join()
        if self._writeback is not None:
            self._writeback.close()

    # ---- the current payload ------------------------------------------------------------------

    def write(self, data: Any) -> None:
        """Appends ``data`` (any buffer: a memoryview of a value's bytes) to the current
        payload, checksumming it as it goes. Returns once every byte is written and
        checksummed, so the caller may drop ``data`` at once."""
        view = memoryview(data).cast("B")
        for start in range(0, len(view), CHUNK_BYTES):
            chunk = view[start : start + CHUNK_BYTES]
            if len(chunk) < PARALLEL_MIN_BYTES:
                self._write_all(chunk)
                self._crc = zlib.crc32(chunk, self._crc)
                continue
            self._jobs.put((chunk, self._crc))
            self._write_all(chunk)
            if self._writeback is not None:
                self._writeback.written_up_to(self.position)
            result = self._results.get()
            if isinstance(result, BaseException):
                raise result
            self._crc = result
        self._length += len(view)

    def copy(self, source_fd: int, offset: int, length: int, crc32: int) -> None:
        """Appends ``length`` bytes of the open file ``source_fd`` from ``offset`` as a whole
        payload whose CRC-32 is already known (computed when those bytes were written there).
        The kernel copies them where it can (``copy_file_range``): no copy in this process."""
        if self._length:
            raise ValueError("copy() appends a whole payload; finish the current one first")
        left = length
        while left:
            copied = _copy_range(source_fd, offset, self._fd, min(left, 1 << 30))
            if copied <= 0:
                raise OSError(f"the payload source ended {left} bytes early")
            offset, left, self.position = offset + copied, left - copied, self.position + copied
            if self._writeback is not None:
                self._writeback.written_up_to(self.position)
        self._length, self._crc = length, crc32

    def finish_payload(self) -> Tuple[int, int]:
        """Ends the current payload; returns its (length, CRC-32)."""
        done = (self._length, self._crc)
        self.finished.append(done)
        self._length, self._crc = 0, 0
        return done

    def crc_table(self) -> bytes:
        """The payload CRC-32 table of every finished payload: little-endian ``u32`` each."""
        return struct.pack(f"<{len(self.finished)}I", *(crc for _, crc in self.finished))

    def write_raw(self, data: Any) -> None:
        """Appends bytes that are no payload (the prefix, the CRC-32 table)."""
        self._write_all(memoryview(data).cast("B"))

    # ---- internals ----------------------------------------------------------------------------

    def _write_all(self, view: memoryview) -> None:
        while len(view):
            written = os.write(self._fd, view)
            view = view[written:]
            self.position += written

    def _checksum_chunks(self) -> None:
        """The worker: the CRC-32 of each chunk handed over, continuing the running CRC it
        comes with."""
        while True:
            job = self._jobs.get()
            if job is None:
                return
            chunk, crc = job
            # No reference to the chunk may outlive its hand-back: the caller releases the
            # value's bytes (a temporary copy) as soon as write() returns.
            del job
            try:
                crc = zlib.crc32(chunk, crc)
            except BaseException as error:  # handed to the main thread, which raises it
                del chunk
                self._results.put(error)
                continue
            del chunk
            self._results.put(crc)


class _Writeback:
    """A thread that starts the writeback of the file's bytes as they are written, in steps of
    :data:`WRITEBACK_STEP_BYTES` (``sync_file_range``, which only queues the I/O)."""

    def __init__(self, fd: int, position: int) -> None:
        self._fd = fd
        self._started = position
        self._requested = position
        self._marks: queue.SimpleQueue[Optional[int]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="torchlens-writeback", daemon=True)
        self._thread.start()

    def written_up_to(self, position: int) -> None:
        """The file holds every byte before ``position``."""
        if position - self._requested >= WRITEBACK_STEP_BYTES:
            self._requested = position
            self._marks.put(position)

    def close(self) -> None:
        if self._thread.is_alive():
            self._marks.put(None)
            self._thread.join()

    def _run(self) -> None:
        start_writeback = _writeback_function()
        while True:
            mark = self._marks.get()
            if mark is None or start_writeback is None:
                return
            start_writeback(self._fd, self._started, mark - self._started)
            self._started = mark


def _copy_range(source: int, offset: int, destination: int, count: int) -> int:
    """Copies up to ``count`` bytes from ``source`` at ``offset`` to ``destination`` at its
    current position, in the kernel where the OS can, else through a bounded buffer."""
    copy_file_range: Optional[Callable[..., int]] = getattr(os, "copy_file_range", None)
    if copy_file_range is not None:
        try:
            return copy_file_range(source, destination, count, offset)
        except OSError:
            pass
    chunk = os.pread(source, min(count, CHUNK_BYTES), offset)
    return os.write(destination, chunk)


_WRITEBACK: List[Optional[Callable[[int, int, int], None]]] = []


def _writeback_function() -> Optional[Callable[[int, int, int], None]]:
    """``sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE)`` (Linux), which starts the
    writeback of a range without waiting for it; None where the OS has none. A hint only: the
    file is fsynced before it is renamed into place either way."""
    if not _WRITEBACK:
        _WRITEBACK.append(_load_sync_file_range())
    return _WRITEBACK[0]


def _load_sync_file_range() -> Optional[Callable[[int, int, int], None]]:
    if not hasattr(os, "sched_getaffinity"):  # not Linux
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    write = 2  # SYNC_FILE_RANGE_WRITE

    def start_writeback(fd: int, offset: int, length: int) -> None:
        function(fd, offset, length, write)  # a failure only means no head start

    return start_writeback
