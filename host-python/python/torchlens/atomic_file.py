"""Writing a file so that its final name only ever holds a complete file: the bytes go to a
temporary file in the same folder (so the rename stays on one filesystem), are fsynced, and the
file is renamed into place and the folder fsynced; any failure removes the temporary and leaves
an existing file as it was. A failure to create, write or rename the file is the typed
:class:`~torchlens.errors.FileAccessError` naming the caller's path, never the temporary.

Renaming over a large file makes the file system free that file's blocks inside the rename
(about 60 ms for 268 MB on ext4), which the caller would wait for although the new file is
complete. So a large file being replaced first gets a second, hidden name beside it; the
rename then only drops a name, and a background thread deletes the hidden name, which frees the
blocks. The final name still changes from the old file to the new one in one atomic rename. The
thread is not a daemon, so the interpreter finishes the deletion before it exits; a process
killed in between leaves a hidden ``.tlspec-*.old`` file, as a kill mid-write leaves a hidden
``.partial`` one."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import threading
import time
from contextlib import contextmanager
from typing import IO, Dict, Iterator, Optional

from .errors import FileAccessError
from .file_errors import file_error


@contextmanager
def atomic_file(
    path: str,
    mode: str = "wb",
    prefix: str = ".tlspec-",
    buffering: int = -1,
    phase_seconds: Optional[Dict[str, float]] = None,
) -> Iterator[IO]:
    """Opens a temporary file beside ``path`` (``mode`` is ``"wb"`` or ``"w"``, UTF-8); on a
    clean exit it is fsynced and renamed to ``path`` (the folder fsynced too), on any exception
    removed. ``buffering=0`` gives an unbuffered binary file, for writers that write large
    blocks to its ``fileno()`` themselves. ``phase_seconds``, when given, receives the time the
    ``fsync`` and the ``rename`` (with the folder's fsync) took."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise file_error(IsADirectoryError(errno.EISDIR, "Is a directory"), path, "write")
    try:
        handle, temporary = tempfile.mkstemp(prefix=prefix, suffix=".partial", dir=directory)
    except OSError as error:
        # Named after the user's path: the temporary is ours, they never asked for it.
        raise file_error(error, path, "write") from None
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
        _replace(temporary, path, prefix)
        _sync_folder(directory)
        phases["rename"] = time.perf_counter() - started
    except BaseException as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if (
            isinstance(error, OSError)
            and not isinstance(error, FileAccessError)
            and _ours(error, temporary, path)
        ):
            raise file_error(error, path, "write") from None
        raise


def _ours(error: OSError, temporary: str, path: str) -> bool:
    """Whether ``error`` came from writing, syncing or renaming the file itself (no file name:
    a write to our descriptor; or the temporary's or the target's name), not from something
    the writer read meanwhile."""
    return error.filename in (None, temporary, path) and error.filename2 in (None, temporary, path)


#: Files at least this large are freed off the caller's path when replaced: below it, freeing
#: the blocks costs less than starting the thread.
DEFERRED_FREE_MIN_BYTES = 16 << 20


def _replace(temporary: str, path: str, prefix: str) -> None:
    """``os.replace(temporary, path)``; a large file it replaces is deleted in the background."""
    old = _second_name(path, prefix)
    os.replace(temporary, path)
    if old is not None:
        threading.Thread(target=_remove_quietly, args=(old,), name="torchlens-free-replaced").start()


def _second_name(path: str, prefix: str) -> Optional[str]:
    """A hidden hard link to the large regular file at ``path`` beside it, or None (no such
    file, a small one, or a file system without hard links: the rename then frees it)."""
    try:
        status = os.lstat(path)
    except OSError:
        return None
    # A symlink at ``path`` is what the rename replaces (not its target): nothing to free.
    if not stat.S_ISREG(status.st_mode) or status.st_size < DEFERRED_FREE_MIN_BYTES:
        return None
    directory = os.path.dirname(os.path.abspath(path))
    for attempt in range(8):
        hidden = os.path.join(directory, f"{prefix}{os.getpid()}-{threading.get_ident()}-{attempt}.old")
        try:
            os.link(path, hidden)
            return hidden
        except FileExistsError:
            continue
        except OSError:
            return None
    return None


def _sync_folder(directory: str) -> None:
    """fsyncs the folder, so the rename itself survives a crash (POSIX; a few ms). Where a
    folder cannot be opened (Windows), the rename is left to the file system."""
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
