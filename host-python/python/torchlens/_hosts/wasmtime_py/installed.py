"""The installed ``wasmtime`` package's version, read from its metadata: asking it imports no
wasmtime (the package has no ``__version__``)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def wasmtime_version() -> str:
    """The installed ``wasmtime`` package's version, ``unknown`` where it is not installed."""
    try:
        return version("wasmtime")
    except PackageNotFoundError:
        return "unknown"
