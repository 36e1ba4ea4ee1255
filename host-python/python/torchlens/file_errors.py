"""Turning an ``OSError`` met while reading or writing a user's path into the typed
:class:`~torchlens.errors.FileAccessError` that names that path (never the hidden temporary a
writer uses)."""

from __future__ import annotations

import errno as errno_codes
import os

from .errors import (
    FileAccessError,
    FileMissingError,
    FilePermissionError,
    NotAFileError,
    NotAFolderError,
)


def file_error(error: OSError, path: str, action: str) -> FileAccessError:
    """The typed error for ``error``, met while ``action`` (``"read"``, ``"write"``) the user's
    ``path``."""
    shown = os.fspath(path)
    code = error.errno
    if isinstance(error, FileNotFoundError) or code == errno_codes.ENOENT:
        folder = os.path.dirname(os.path.abspath(shown))
        if action == "write" and not os.path.isdir(folder):
            return FileMissingError(
                f"cannot write {shown!r}: its folder {folder!r} does not exist",
                "io_not_found",
                "create the folder first (os.makedirs(folder, exist_ok=True)) or choose another path",
                shown,
                code,
            )
        return FileMissingError(
            f"cannot {action} {shown!r}: no such file", "io_not_found", "check the path", shown, code
        )
    if isinstance(error, IsADirectoryError) or code == errno_codes.EISDIR:
        return NotAFileError(
            f"cannot {action} {shown!r}: it is a folder, not a file",
            "io_not_a_file",
            "name a file inside the folder, e.g. " + repr(os.path.join(shown, "trace.tlspec")),
            shown,
            code,
        )
    if isinstance(error, NotADirectoryError) or code == errno_codes.ENOTDIR:
        return NotAFolderError(
            f"cannot {action} {shown!r}: a part of the path is a file where a folder is needed",
            "io_not_a_folder",
            "check the path: each part before the last must be a folder",
            shown,
            code,
        )
    if isinstance(error, PermissionError) or code in (errno_codes.EACCES, errno_codes.EPERM):
        return FilePermissionError(
            f"cannot {action} {shown!r}: permission denied",
            "io_permission_denied",
            "choose a path this user may " + action + ", or change the permissions",
            shown,
            code,
        )
    return FileAccessError(
        f"cannot {action} {shown!r}: {error.strerror or error}",
        "io_error",
        "check the disk (free space, a read-only mount) and the path",
        shown,
        code,
    )


def existing_folder(path: str, remedy: str) -> str:
    """``path`` when it is a folder; else the typed error (missing, or a file), with ``remedy``."""
    if os.path.isdir(path):
        return path
    if os.path.exists(path):
        return_error: FileAccessError = NotAFolderError(
            f"{path!r} is a file, not a folder", "io_not_a_folder", remedy, path, errno_codes.ENOTDIR
        )
    else:
        return_error = FileMissingError(
            f"no folder {path!r}", "io_not_found", remedy, path, errno_codes.ENOENT
        )
    raise return_error


def created_folder(path: str) -> str:
    """Creates ``path`` (and its parents) if missing; a file in the way, or no permission, is the
    typed error naming ``path``."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotAFolderError(
            f"cannot write into {path!r}: it is a file, not a folder",
            "io_not_a_folder",
            "pass a folder path (it is created when missing)",
            path,
            errno_codes.ENOTDIR,
        )
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise file_error(error, path, "write") from None
    return path
