"""Which version of a framework is installed, read the same way for every backend (the manifest's
``backend_version``, the scorecards and ``tl.report.doctor()``)."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import sys
from typing import List, Mapping, Optional


def installed_version(module: str) -> Optional[str]:
    """The installed version of the distribution that provides the import name ``module``, read
    from package metadata (the framework is not imported), or None when it is not installed.
    A distribution named like the module wins over others that add files to it (``name`` over
    ``name-cpu``)."""
    if importlib.util.find_spec(module) is None:
        return None
    providers = sorted(_providers().get(module, ()), key=lambda name: name.lower() != module.lower())
    for distribution in providers:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def runtime_version(module: str) -> str:
    """The version of the framework imported as ``module``: its ``__version__`` where it has one,
    else its distribution's (some frameworks, and namespace packages, carry no ``__version__``), else
    ``"unknown"``."""
    version = getattr(sys.modules.get(module), "__version__", None)
    if isinstance(version, str) and version:
        return version
    return installed_version(module) or "unknown"


@functools.lru_cache(maxsize=1)
def _providers() -> Mapping[str, List[str]]:
    # Scanning every installed distribution takes tens of milliseconds: once per process.
    return importlib.metadata.packages_distributions()
