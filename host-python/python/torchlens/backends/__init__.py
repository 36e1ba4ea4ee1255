"""Backends: one adapter per framework. An adapter imports its framework only when first used,
so ``import torchlens`` imports no framework."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Dict

from ..errors import BackendUnsupportedError

#: Backend name → (adapter module, install extra, framework module).
_REGISTRY: Dict[str, tuple] = {
    "torch": ("torchlens.backends.torch", "torch", "torch"),
}
_ALIASES = {"pytorch": "torch"}
_LOADED: Dict[str, Any] = {}


def names() -> list:
    """Registered backend names."""
    return sorted(_REGISTRY)


def get_backend(name: str) -> Any:
    """The adapter for a backend name (importing its framework now)."""
    name = _ALIASES.get(name, name)
    if name not in _REGISTRY:
        raise BackendUnsupportedError(
            f"no backend named {name!r} is available; registered: {', '.join(names())}",
            "backend_unknown",
            "pass backend=None to route by model type, or one of the registered names",
            framework=name,
        )
    if name not in _LOADED:
        module_name, extra, framework = _REGISTRY[name]
        try:
            importlib.import_module(framework)
        except ImportError as error:
            raise BackendUnsupportedError(
                f"the {name} backend needs {framework}, which is not installed",
                "framework_not_installed",
                f"pip install 'torchlens[{extra}]'",
                framework=name,
            ) from error
        _LOADED[name] = importlib.import_module(module_name).BACKEND
    return _LOADED[name]


def resolve(model: Any, inputs: Any, backend: Any) -> Any:
    """The backend for a call: the named one, or (``backend=None``) the one whose framework the
    model belongs to. Only frameworks already imported by the caller are considered, so routing
    never imports a framework."""
    if backend is not None:
        return get_backend(backend)
    candidates = [
        name
        for name, (_, _, framework) in _REGISTRY.items()
        if framework in sys.modules and get_backend(name).detect(model, inputs)
    ]
    if len(candidates) == 1:
        return get_backend(candidates[0])
    if not candidates:
        raise BackendUnsupportedError(
            f"could not tell which framework {type(model).__name__} belongs to",
            "backend_undetected",
            "pass backend= explicitly (for example backend='torch')",
        )
    raise BackendUnsupportedError(
        f"{type(model).__name__} matches several backends: {', '.join(candidates)}",
        "backend_ambiguous",
        "pass backend= explicitly",
    )
