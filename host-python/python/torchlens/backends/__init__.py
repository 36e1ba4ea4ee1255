"""Backends: one adapter per framework behind one contract (``BackendSpec``). An adapter imports
its framework only when first used, so ``import torchlens`` imports no framework.

``REFUSAL_CODES`` and ``VALIDATION_REASONS`` are the closed sets the core defines."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any, Dict, List, Optional

from ..errors import BackendUnsupportedError
from .contract import (
    BackendProtocol,
    BackendSpec,
    FrameworkRequirement,
    check_registration,
    gate,
    gate_capture_request,
    refusal_codes,
    validation_reasons,
)

__all__ = [
    "REFUSAL_CODES",
    "VALIDATION_REASONS",
    "BackendProtocol",
    "BackendSpec",
    "FrameworkRequirement",
    "gate",
    "gate_capture_request",
    "get_backend",
    "get_spec",
    "names",
    "register_backend",
    "resolve",
]

#: Root module of an array's type → the backend whose framework it belongs to.
_ARRAY_FRAMEWORKS = {
    "torch": "torch",
    "jax": "jax",
    "jaxlib": "jax",
    "tensorflow": "tf",
    "keras": "tf",
    "mlx": "mlx",
    "paddle": "paddle",
    "tinygrad": "tinygrad",
}

_SPECS: Dict[str, BackendSpec] = {}
_ALIASES: Dict[str, str] = {}
_LOADED: Dict[str, BackendProtocol] = {}


def _type_root(value: Any) -> str:
    return type(value).__module__.split(".", 1)[0]


def _array_frameworks(value: Any, found: set, depth: int = 0) -> None:
    """Backends whose arrays appear in ``value`` (nested tuples, lists, dicts)."""
    if depth > 8:
        return
    framework = _ARRAY_FRAMEWORKS.get(_type_root(value))
    if framework is not None and not isinstance(value, type):
        if framework != "torch" or type(value).__name__ in ("Tensor", "Parameter"):
            found.add(framework)
            return
    if isinstance(value, (tuple, list)):
        for item in value:
            _array_frameworks(item, found, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            _array_frameworks(item, found, depth + 1)


def _array_framework(spec: BackendSpec) -> str:
    """The array family a backend's framework produces (``tensorflow`` arrays are ``tf``)."""
    return _ARRAY_FRAMEWORKS.get(spec.requirement.module, spec.name)


def _torch_detect(model: Any, inputs: Any) -> bool:
    if "torch" not in sys.modules:
        return False
    import torch

    if isinstance(model, torch.nn.Module):
        return True
    found: set = set()
    _array_frameworks(inputs, found)
    return callable(model) and found == {"torch"}


def _root_module_detect(*roots: str):
    def detect(model: Any, inputs: Any) -> bool:
        return _type_root(model) in roots

    return detect


def _load_torch() -> BackendProtocol:
    return importlib.import_module("torchlens.backends.torch").PROTOCOL


def register_backend(spec: BackendSpec) -> None:
    """Registers a backend after the core checks its declaration (a capability flagged True
    must bind an implementation: ``BackendCapabilityConformanceError`` otherwise)."""
    check_registration(spec)
    _SPECS[spec.name] = spec
    for alias in spec.aliases:
        _ALIASES[alias] = spec.name


def unregister_backend(name: str) -> None:
    """Removes a backend (tests register temporary ones)."""
    spec = _SPECS.pop(name, None)
    if spec is not None:
        for alias in spec.aliases:
            _ALIASES.pop(alias, None)
    _LOADED.pop(name, None)


def names() -> List[str]:
    """Registered backend names."""
    return sorted(_SPECS)


def get_spec(name: str) -> BackendSpec:
    """The spec registered under a name or alias."""
    key = _ALIASES.get(name, name)
    if key not in _SPECS:
        raise BackendUnsupportedError(
            f"no backend named {name!r}; registered: {', '.join(names())}",
            "backend_unknown",
            "pass backend=None to route by model type, or one of the registered names",
            framework=name,
        )
    return _SPECS[key]


def _require_framework(spec: BackendSpec) -> None:
    requirement = spec.requirement
    if requirement.module not in sys.modules and importlib.util.find_spec(requirement.module) is None:
        raise BackendUnsupportedError(
            f"the {spec.name} backend needs {requirement.module}, which is not installed",
            "framework_not_installed",
            f"pip install 'torchlens[{requirement.extra}]'",
            framework=spec.name,
        )


def get_backend(name: str) -> BackendProtocol:
    """The protocol object of a backend (importing its framework now)."""
    spec = get_spec(name)
    if spec.name not in _LOADED:
        _require_framework(spec)
        _LOADED[spec.name] = spec.protocol()
    return _LOADED[spec.name]


def resolve(model: Any, inputs: Any, backend: Optional[str]) -> BackendSpec:
    """The backend for a call. Foreign arrays are checked first: a model is never routed to a
    backend whose framework differs from its inputs'. With ``backend=None`` each registered
    backend's detector votes; no vote or a tie is a typed error, never a silent pick. Routing
    never imports a framework the caller has not imported."""
    found: set = set()
    _array_frameworks(inputs, found)
    if backend is not None:
        spec = get_spec(backend)
        # A backend that cannot run here says so first: its framework, then whether it is built.
        get_backend(spec.name)
        foreign = found - {_array_framework(spec)}
        if foreign:
            raise BackendUnsupportedError(
                f"the inputs hold {', '.join(sorted(foreign))} arrays, not {spec.name} ones",
                "foreign_tensor_input",
                f"convert the inputs to {spec.name} arrays, or pass backend= for their framework",
                framework=spec.name,
            )
        return spec
    if len(found) > 1:
        raise BackendUnsupportedError(
            f"the inputs mix arrays of {', '.join(sorted(found))}",
            "foreign_tensor_input",
            "give the model inputs of one framework",
        )
    candidates = [
        spec
        for spec in _SPECS.values()
        if spec.detect is not None
        and (not found or _array_framework(spec) in found)
        and spec.detect(model, inputs)
    ]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise BackendUnsupportedError(
            f"could not tell which framework {type(model).__name__} belongs to",
            "backend_undetected",
            "pass backend= explicitly (for example backend='torch')",
        )
    raise BackendUnsupportedError(
        f"{type(model).__name__} matches several backends: {', '.join(s.name for s in candidates)}",
        "backend_ambiguous",
        "pass backend= explicitly",
    )


def _preview(
    name: str, aliases: tuple, module: str, minimum: str, ceiling: str, pinned: str, extra: str, roots
):
    return BackendSpec(
        name=name,
        aliases=aliases,
        maturity="planned",
        requirement=FrameworkRequirement(module, minimum, ceiling, pinned, extra),
        detect=_root_module_detect(*roots),
    )


def _register_builtin() -> None:
    """The six backends of the spec. Torch and JAX are built; the others are registered as
    planned so routing, install hints and the capability matrix already cover them."""
    from .jax_spec import JAX_SPEC
    from .torch_spec import TORCH_SPEC

    for built in (TORCH_SPEC, JAX_SPEC):
        _SPECS[built.name] = built
        _ALIASES.update({alias: built.name for alias in built.aliases})
    for spec in (
        _preview(
            "tf", ("tensorflow",), "tensorflow", "2.16", "2.22", "2.21.0", "tf", ("tensorflow", "keras")
        ),
        _preview("mlx", (), "mlx", "0.26", "0.27", "0.26.3", "mlx", ("mlx",)),
        _preview("paddle", (), "paddle", "3.3", "3.4", "3.3.1", "paddle", ("paddle",)),
        _preview("tinygrad", (), "tinygrad", "0.13", "0.14", "0.13.0", "tinygrad", ("tinygrad",)),
    ):
        _SPECS[spec.name] = spec
        _ALIASES.update({alias: spec.name for alias in spec.aliases})


_register_builtin()


def __getattr__(name: str) -> Any:
    # The closed sets come from the core, loaded on first access (not at import).
    if name == "REFUSAL_CODES":
        return frozenset(refusal_codes())
    if name == "VALIDATION_REASONS":
        return frozenset(validation_reasons())
    spec = _SPECS.get(_ALIASES.get(name, name))
    if spec is not None and spec.load is not None:
        # tl.backends.jax: the adapter package (imports its framework now, on first access).
        _require_framework(spec)
        return importlib.import_module(f"torchlens.backends.{spec.name}")
    raise AttributeError(name)
