"""Where a warning the kit raises points: at the user's line that called into TorchLens, however
many kit and backend frames lie between (a fixed ``stacklevel`` breaks whenever the pipeline
gains or loses a frame). A third party's backend lives outside the package, so the user's line
is the caller of the outermost TorchLens frame, not the first frame outside it."""

from __future__ import annotations

import os
import sys

#: The installed ``torchlens`` package folder (backends are installed inside it).
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the calling function point at the
    caller of the outermost ``torchlens`` frame (the line that called ``tl.trace``)."""
    frame = sys._getframe(1)
    level, found = 1, 1
    while frame is not None:
        if frame.f_code.co_filename.startswith(_PACKAGE):
            found = level + 1
        frame = frame.f_back
        level += 1
    return found
