"""The two hosts of the core component, behind one interface.

- ``native``: the pyo3 extension ``torchlens._native`` (wasmtime compiled in; the platform
  wheel). The fast path.
- ``wasmtime-py``: the same component bytes under the ``wasmtime`` package from PyPI (the
  ``py3-none-any`` wheel), for platforms without a native wheel.

Each host gives ``untrusted_core()`` (a new instance under the CLI's limits: memory cap, fuel,
deadline per call, for files from anyone), ``core()`` (this thread's core: ``version``,
``build_id``, ``start_session``, ``decode_tlspec`` ... with sessions and traces whose methods
and return shapes match, see ``wasmtime_py/bindings.py``) and ``runtime_version()``.
``TORCHLENS_HOST=native`` or ``=wasmtime-py`` forces one; otherwise the native host runs when
its extension imports.
"""

from __future__ import annotations

import os
from typing import Any

from .. import errors
from . import wasmtime_py
from .native import native_extension

HOST_ENV = "TORCHLENS_HOST"
NATIVE = "native"
WASMTIME_PY = "wasmtime-py"
HOSTS = (NATIVE, WASMTIME_PY)


class _NativeHost:
    name = NATIVE

    @staticmethod
    def core() -> Any:
        # The extension hands back the same instance each time, or a fresh one after a trap.
        return native_extension().core()

    @staticmethod
    def untrusted_core() -> Any:
        # A new instance under the CLI's limits (engine.rs ``untrusted_core``).
        return native_extension().untrusted_core()

    @staticmethod
    def runtime_version() -> str:
        return native_extension().WASMTIME_VERSION


class _WasmtimePyHost:
    name = WASMTIME_PY

    @staticmethod
    def core() -> Any:
        return wasmtime_py.core()

    @staticmethod
    def untrusted_core() -> Any:
        return wasmtime_py.untrusted_core()

    @staticmethod
    def runtime_version() -> str:
        return wasmtime_py.runtime_version()


_active: Any = None


def active() -> Any:
    """The host this process runs (chosen on first use, then fixed)."""
    global _active
    if _active is not None:
        return _active
    wanted = os.environ.get(HOST_ENV, "").strip()
    if wanted and wanted not in HOSTS:
        raise errors.CoreUnavailableError(
            f"{HOST_ENV}={wanted!r} names no host",
            "core_host_unknown",
            f"set {HOST_ENV} to one of {', '.join(HOSTS)}, or unset it",
        )
    if wanted == WASMTIME_PY:
        _active = _WasmtimePyHost
    elif wanted == NATIVE:
        try:
            native_extension()
        except ImportError as error:
            raise errors.CoreUnavailableError(
                f"{HOST_ENV}=native but the native extension does not import: {error}",
                "core_component_unavailable",
                "install the platform wheel of torchlens, or unset TORCHLENS_HOST",
            ) from error
        _active = _NativeHost
    else:
        try:
            native_extension()
            _active = _NativeHost
        except ImportError:
            _active = _WasmtimePyHost
    return _active
