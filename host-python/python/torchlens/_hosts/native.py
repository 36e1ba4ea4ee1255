"""The native extension, ``torchlens._native`` (the pyo3 module of the platform wheel; the pure
wheel has none). The native host runs it; the wasmtime-py host reads the component bytes it
embeds when the wheel carries no component file."""

from __future__ import annotations

from types import ModuleType


def native_extension() -> ModuleType:
    """The native extension; ``ImportError`` where this install has none."""
    # lazy: the extension is absent from the pure wheel, and loading it is the host choice
    # (importing torchlens loads no host)
    from .. import _native

    return _native
