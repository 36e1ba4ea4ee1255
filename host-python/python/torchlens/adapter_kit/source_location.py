"""Where the user's code called an op: the first frame outside the framework's and TorchLens's
own folders. An op called from a module's ``forward`` sits several framework frames below the
user's line (the module call machinery, functional wrappers), and the walk runs on every op, so
whether a code object is skipped is decided once per code object, not once per frame visited."""

from __future__ import annotations

import sys
from types import CodeType
from typing import Dict, Iterable, Optional, Tuple

#: Code objects remembered before the cache starts over (generated code, e.g. a graph tracer's, makes
#: new code objects; the cache must not grow with them for the life of the process).
MAX_REMEMBERED_CODE = 20_000

#: (file, line, function) of a source location.
SourceLocation = Tuple[str, int, str]


class SourceLocator:
    """Finds the user's frame, skipping frames whose file lies in ``skipped_folders``."""

    __slots__ = ("_skipped_folders", "_skipped")

    def __init__(self, skipped_folders: Iterable[str]) -> None:
        self._skipped_folders = tuple(skipped_folders)
        #: Code object → whether its file lies in a skipped folder.
        self._skipped: Dict[CodeType, bool] = {}

    @property
    def skipped_folders(self) -> Tuple[str, ...]:
        """The folders whose frames are skipped."""
        return self._skipped_folders

    def locate(self, depth: int) -> Optional[SourceLocation]:
        """The location of the first user frame at or above ``depth`` frames below the caller
        (``depth=0`` starts at the caller's own frame), or None when every frame is skipped."""
        frame = sys._getframe(depth + 1)
        skipped = self._skipped
        while frame is not None:
            code = frame.f_code
            is_skipped = skipped.get(code)
            if is_skipped is None:
                if len(skipped) >= MAX_REMEMBERED_CODE:
                    skipped.clear()
                is_skipped = skipped[code] = code.co_filename.startswith(self._skipped_folders)
            if not is_skipped:
                return code.co_filename, frame.f_lineno, code.co_name
            frame = frame.f_back
        return None
