"""Access to the core component (loaded on first use, then shared by the process)."""

from __future__ import annotations

from typing import Any

_CORE: Any = None


def core() -> Any:
    """The process's core: the compiled component running under wasmtime."""
    global _CORE
    if _CORE is None:
        from . import _native

        _CORE = _native.core()
    return _CORE


def versions() -> dict:
    """The versions TorchLens runs on: the core component and the wasmtime that runs it."""
    from . import _native

    return {
        "torchlens": __import__("torchlens").__version__,
        "core_component": core().version(),
        "wasmtime": _native.WASMTIME_VERSION,
    }
