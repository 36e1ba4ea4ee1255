"""Access to the core component (loaded on first use, then shared by the process)."""

from __future__ import annotations

from typing import Any


def core() -> Any:
    """The process's core: the compiled component running under wasmtime."""
    from . import _native

    # The extension hands back the same instance each time, or a fresh one after a trap.
    return _native.core()


def versions() -> dict:
    """The versions TorchLens runs on: the core component and the wasmtime that runs it."""
    from . import _native

    return {
        "torchlens": __import__("torchlens").__version__,
        "core_component": core().version(),
        "wasmtime": _native.WASMTIME_VERSION,
    }
