"""Writing a file so that its final name only ever holds a complete file: the bytes go to a
temporary file in the same folder (so the rename stays on one filesystem), are fsynced, and the
file is renamed into place; any failure removes the temporary and leaves an existing file as it
was."""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from typing import IO, Dict, Iterator, Optional


@contextmanager
def atomic_file(
    path: str,
    mode: str = "wb",
    prefix: str = ".tlspec-",
    buffering: int = -1,
    phase_seconds: Optional[Dict[str, float]] = None,
) -> Iterator[IO]:
    """Opens a temporary file beside ``path`` (``mode`` is ``"wb"`` or ``"w"``, UTF-8); on a
    clean exit it is fsynced and renamed to ``path``, on any exception removed. ``buffering=0``
    gives an unbuffered binary file, for writers that write large blocks to its ``fileno()``
    themselves. ``phase_seconds``, when given, receives the time the ``fsync`` and the
    ``rename`` took."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=prefix, suffix=".partial", dir=directory)
    phases = {} if phase_seconds is None else phase_seconds
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(handle, mode, buffering=buffering, encoding=encoding) as stream:
            yield stream
            stream.flush()
            started = time.perf_counter()
            os.fsync(stream.fileno())
            phases["fsync"] = time.perf_counter() - started
        started = time.perf_counter()
        os.replace(temporary, path)
        phases["rename"] = time.perf_counter() - started
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
