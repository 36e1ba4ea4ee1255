"""The exceptions TorchLens raises. Every one carries a stable ``code`` and a ``remedy``."""

from __future__ import annotations


class TorchLensError(Exception):
    """Base class: ``code`` is stable across releases, ``remedy`` says what to do."""

    def __init__(self, message: str, code: str = "torchlens_error", remedy: str = "") -> None:
        super().__init__(f"[{code}] {message}" + (f" (remedy: {remedy})" if remedy else ""))
        self.message = message
        self.code = code
        self.remedy = remedy


class CaptureEventsError(TorchLensError):
    """An adapter reported capture events the core could not make sense of (a bug in the adapter)."""


class SelectorError(TorchLensError, ValueError):
    """A selector is malformed or cannot be used where it was given."""


class TlspecFormatError(TorchLensError, ValueError):
    """A ``.tlspec`` file is truncated, corrupted or not a ``.tlspec`` at all."""


class TlspecVersionError(TlspecFormatError):
    """A ``.tlspec`` file of a format version this TorchLens does not read."""


class LimitExceededError(TorchLensError):
    """An input went past one of the core's bounds (ranks, counts, sizes)."""


class InvalidTraceError(TorchLensError):
    """A trace breaks an invariant of the trace model."""


class NotFoundError(TorchLensError, KeyError):
    """A label, index or address the trace does not hold."""


class UnsupportedError(TorchLensError):
    """A request TorchLens understands but cannot honour."""


class CoreTrapError(TorchLensError):
    """The core component was stopped by its sandbox; a new instance is used next time."""


class CoreUnavailableError(TorchLensError):
    """The core component could not be loaded."""


class BackendUnsupportedError(TorchLensError):
    """A backend refuses a capability, option or input, before any side effect."""

    def __init__(self, message: str, code: str, remedy: str = "", framework: str = "") -> None:
        super().__init__(message, code, remedy)
        self.framework = framework


class NestedTraceError(TorchLensError):
    """``tl.trace`` was called inside a forward that ``tl.trace`` is recording on the same thread
    (code ``trace_nested``). Other threads may trace at the same time."""


class CaptureError(TorchLensError):
    """The model's forward raised during capture; the original exception is the cause."""


class SelectorMatchedNothingWarning(UserWarning):
    """A selector matched no op: it never silently does nothing."""


class BackendCapabilityConformanceError(TorchLensError):
    """A backend flags a capability True but binds no implementation for it."""


class CaptureUnverifiedWarning(UserWarning):
    """The capture may be incomplete; ``trace.capture_reason`` names why."""


class PayloadModifiedError(TorchLensError):
    """A saved value that is the model's own tensor was modified in place after the capture."""


class DerivedGradUnavailableWarning(UserWarning):
    """Per-op derived gradients were asked for but could not be produced;
    ``trace.autograd.intermediate_unavailable`` holds the code."""


class BackendDeclarationWarning(UserWarning):
    """An adapter declared through the ``torchlens.backends`` entry-point group could not be
    registered (it failed to load, declared no ``BackendSpec``, failed the core's registration
    check, or reused a registered name); it is skipped and the other backends still work."""


class SelectionIncompleteWarning(UserWarning):
    """Ops matched ``save=`` whose values were released during capture before the live plan
    could select them (``trace.selection_missed`` lists their labels); they are not saved."""


class PatchError(TorchLensError):
    """``tl.patch_from``: the source trace has no matching site, or its value has another
    shape."""


class ExtractionError(TorchLensError):
    """A dataset extraction (``tl.extract_dataset`` / ``tl.load_extraction``) cannot go on: bad
    arguments, an output folder of another job, batches that disagree, a damaged shard."""


class ArgumentError(TorchLensError, ValueError, TypeError):
    """A public function was given an argument it cannot use (what was given and what is
    accepted are in the message; ``code`` says which case)."""


class OpIndexError(TorchLensError, IndexError):
    """``trace[n]`` with ``n`` outside the trace's ops (``op_index_out_of_range``)."""


class FileAccessError(TorchLensError, OSError):
    """A file or folder the user named cannot be read or written (code ``io_error``, or a more
    precise ``io_*`` code in a subclass). Each is also the matching built-in ``OSError``
    (``FileNotFoundError``, ``IsADirectoryError``, ...), so ``except FileNotFoundError`` keeps
    working; ``filename`` is always the user's path, never a temporary file of ours."""

    def __init__(self, message: str, code: str, remedy: str, path: str, errno: int | None = None) -> None:
        TorchLensError.__init__(self, message, code, remedy)
        self.filename = path
        self.errno = errno
        self.strerror = message


class FileMissingError(FileAccessError, FileNotFoundError):
    """The file, or the folder it should be written into, does not exist (``io_not_found``)."""


class NotAFileError(FileAccessError, IsADirectoryError):
    """A folder was named where a file is read or written (``io_not_a_file``)."""


class NotAFolderError(FileAccessError, NotADirectoryError):
    """A file was named where a folder is read or written (``io_not_a_folder``)."""


class FilePermissionError(FileAccessError, PermissionError):
    """The process may not read or write the path (``io_permission_denied``)."""
