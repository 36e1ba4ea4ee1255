"""Writing a file so that its final name only ever holds a complete file: the bytes go to a
temporary file in the same folder (so the rename stays on one filesystem), are fsynced, and the
file is renamed into place; any failure removes the temporary and leaves an existing file as it
was."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from typing import IO, Iterator


@contextmanager
def atomic_file(path: str, mode: str = "wb", prefix: str = ".tlspec-") -> Iterator[IO]:
    """Opens a temporary file beside ``path`` (``mode`` is ``"wb"`` or ``"w"``, UTF-8); on a
    clean exit it is fsynced and renamed to ``path``, on any exception removed."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=prefix, suffix=".partial", dir=directory)
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(handle, mode, encoding=encoding) as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
