"""The wasmtime-py host: the core component under the ``wasmtime`` package from PyPI, for
installs without the pyo3 extension (the ``py3-none-any`` wheel). See docs/python-package.md."""

from __future__ import annotations

import threading
from importlib import resources
from typing import TYPE_CHECKING, Optional, Tuple, Type

from ... import errors
from ..native import native_extension
from .installed import wasmtime_version

if TYPE_CHECKING:  # the bindings import the wasmtime package, which may be missing
    from .bindings import Core
    from .runtime import Limits, Threads

#: The component file the pure wheel carries next to this package.
COMPONENT_RESOURCE = "torchlens_core.wasm"

_threads: Optional[Threads] = None
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


def core() -> Core:
    """This thread's core instance under the ``wasmtime`` package."""
    global _threads
    core_class, threads_class, _limits = _host_classes()
    with _threads_lock:
        threads = _threads
        if threads is None:
            threads = _threads = threads_class(component_bytes)
    instance, runtime = threads.instance()
    return core_class(instance, runtime)


def _host_classes() -> Tuple[Type[Core], Type[Threads], Limits]:
    """``(Core, Threads, UNTRUSTED)`` of the bindings, which import the ``wasmtime`` package."""
    try:
        # lazy: wasmtime is an optional dependency (the pure wheel's); these modules import it
        from .bindings import Core
        from .runtime import UNTRUSTED, Threads
    except ImportError as error:
        raise errors.CoreUnavailableError(
            f"the wasmtime-py host needs the 'wasmtime' package: {error}",
            "core_component_unavailable",
            "pip install 'wasmtime>=50,<51' (the py3-none-any torchlens wheel depends on it)",
        ) from error
    return Core, Threads, UNTRUSTED


_untrusted: Optional[Threads] = None


def untrusted_core() -> Core:
    """A new core instance under the CLI's limits (``runtime.UNTRUSTED``: 512 MiB, fuel, a
    30 s deadline per call), for files from anyone; each call gets its own instance."""
    global _untrusted
    core_class, threads_class, limits = _host_classes()
    with _threads_lock:
        threads = _untrusted
        if threads is None:
            threads = _untrusted = threads_class(component_bytes, limits)
    instance, runtime = threads.fresh_instance()
    return core_class(instance, runtime)


def runtime_version() -> str:
    """The version of the ``wasmtime`` package running the component."""
    return wasmtime_version()
