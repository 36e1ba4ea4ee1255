"""Access to the core component (loaded on first use, then shared by the process), through
whichever host runs it (``torchlens._hosts``: the native extension or the wasmtime package)."""

from __future__ import annotations

from typing import Any

from ._hosts import active


def core() -> Any:
    """This thread's core: the compiled component, under the active host."""
    return active().core()


def versions() -> dict:
    """The versions TorchLens runs on: the core component, its build id, the host running it
    (``native`` or ``wasmtime-py``) and the wasmtime version inside that host."""
    host = active()
    running = host.core()
    return {
        "torchlens": __import__("torchlens").__version__,
        "core_component": running.version(),
        "core_build_id": running.build_id(),
        "host": host.name,
        "wasmtime": host.runtime_version(),
    }
