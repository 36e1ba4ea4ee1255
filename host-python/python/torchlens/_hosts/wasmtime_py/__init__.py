"""The wasmtime-py host: the core component under the ``wasmtime`` package from PyPI, for
installs without the pyo3 extension (the ``py3-none-any`` wheel). See docs/python-package.md."""

from __future__ import annotations

import threading
from importlib import resources
from typing import Any, Optional

from ... import errors
from ..native import native_extension
from .installed import wasmtime_version

#: The component file the pure wheel carries next to this package.
COMPONENT_RESOURCE = "torchlens_core.wasm"

_threads: Optional[Any] = None
_threads_lock = threading.Lock()


def component_bytes() -> bytes:
    """The component this host runs: the file the pure wheel carries, else the identical bytes
    the pyo3 extension embeds (a development checkout or the platform wheel)."""
    packaged = resources.files("torchlens").joinpath(COMPONENT_RESOURCE)
    if packaged.is_file():
        return packaged.read_bytes()
    try:
        return native_extension().embedded_component()
    except ImportError:
        raise errors.CoreUnavailableError(
            f"torchlens carries no core component ({COMPONENT_RESOURCE}) and no native extension",
            "core_component_unavailable",
            "reinstall torchlens from a wheel (pip install --force-reinstall torchlens)",
        ) from None


def core() -> Any:
    """This thread's core instance under the ``wasmtime`` package."""
    global _threads
    try:
        # lazy: wasmtime is an optional dependency (the pure wheel's); these modules import it
        from .bindings import Core
        from .runtime import Threads
    except ImportError as error:
        raise errors.CoreUnavailableError(
            f"the wasmtime-py host needs the 'wasmtime' package: {error}",
            "core_component_unavailable",
            "pip install 'wasmtime>=50,<51' (the py3-none-any torchlens wheel depends on it)",
        ) from error
    with _threads_lock:
        if _threads is None:
            _threads = Threads(component_bytes)
    instance, runtime = _threads.instance()
    return Core(instance, runtime)


def runtime_version() -> str:
    """The version of the ``wasmtime`` package running the component."""
    return wasmtime_version()
