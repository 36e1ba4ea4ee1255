"""Whether a source file belongs to one of the packages a process has imported (a framework's or
a library's own code, told apart from the user's)."""

from __future__ import annotations

import functools
import os
import sys
from typing import Iterable, Tuple


def package_folders(names: Iterable[str]) -> Tuple[str, ...]:
    """The folder of each package of ``names`` already imported (one not imported is left
    out: nothing is imported here), resolved, with a trailing separator."""
    folders = []
    for name in names:
        module = sys.modules.get(name)
        source = getattr(module, "__file__", None) if module is not None else None
        if source:
            folders.append(os.path.dirname(os.path.realpath(source)) + os.sep)
    return tuple(folders)


@functools.lru_cache(maxsize=4096)
def in_packages(filename: str, names: Tuple[str, ...]) -> bool:
    """Whether source file ``filename`` lies in one of the packages ``names`` (resolved once
    per file and packages: a capture may ask for every frame or function it meets). A name
    that is no absolute path (``<string>``) is compared as it is."""
    where = os.path.realpath(filename) if filename.startswith(os.sep) else filename
    return where.startswith(package_folders(names))
