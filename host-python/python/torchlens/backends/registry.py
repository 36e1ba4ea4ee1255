"""The backend registry. Backends are discovered, not listed: every entry point of the
``torchlens.backends`` group declares one :class:`BackendSpec`, the built-in backends (this
distribution's own entry points, their code in the repository's ``backends/<name>/``) and adapters
shipped by other packages alike. Adding an adapter edits no code here. Routing never imports a
framework the caller has not imported."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import warnings
from typing import Any, Dict, List, Optional

from .._core import core
from ..errors import BackendDeclarationWarning, BackendUnsupportedError
from .scorecard import CapabilitySummary
from .spec import MATURITIES, BackendSpec

#: The entry-point group a package uses to declare an adapter: ``name = "module:SPEC"``.
ENTRY_POINT_GROUP = "torchlens.backends"

#: The distribution whose entry points are the built-in backends.
DISTRIBUTION = "torchlens"

_SPECS: Dict[str, BackendSpec] = {}
_ALIASES: Dict[str, str] = {}
_LOADED: Dict[str, Any] = {}
#: Backends declared by this package itself (the others came through entry points or
#: ``register_backend``).
_BUILT_IN: Dict[str, BackendSpec] = {}
_DISCOVERED = False


def _discover() -> None:
    """Registers every declared backend once: the entry points of :data:`ENTRY_POINT_GROUP`, the
    built-in ones (declared by the ``torchlens`` distribution) first, each group by name."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    declared = sorted(
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
        key=lambda entry_point: (not _is_built_in(entry_point), entry_point.name),
    )
    for entry_point in declared:
        # An adapter must not take the registry down with it: one that fails to load, is not a
        # BackendSpec, fails the core's registration check or takes a name that is already
        # registered is skipped with a warning that names it.
        try:
            spec = entry_point.load()
            if not isinstance(spec, BackendSpec):
                raise TypeError(f"it declares a {type(spec).__name__}, not a BackendSpec")
            if spec.name in _SPECS:
                raise ValueError(f"the name {spec.name!r} is already registered")
            check_registration(spec)
        except Exception as error:
            warnings.warn(
                f"[backend_declaration_skipped] the adapter declared by entry point "
                f"{entry_point.name!r} ({entry_point.value}) was not registered: {error}",
                BackendDeclarationWarning,
                stacklevel=2,
            )
            continue
        if _is_built_in(entry_point):
            _BUILT_IN[spec.name] = spec
            # tl.backends.<name>.capability_summary: what the shipped scorecard proves (read on
            # first use, no framework import).
            package = sys.modules.get(entry_point.module.rpartition(".")[0])
            if package is not None:
                package.capability_summary = CapabilitySummary(spec)  # type: ignore[attr-defined]
        _add(spec)


def check_registration(spec: BackendSpec) -> None:
    """Raises ``BackendCapabilityConformanceError`` when a True flag has no implementation."""
    if spec.maturity not in MATURITIES:
        raise ValueError(f"maturity must be one of {MATURITIES}")
    core().register_backend(*spec.declaration())


def _is_built_in(entry_point: Any) -> bool:
    """Whether this distribution (``torchlens``) declares the entry point."""
    distribution = getattr(entry_point, "dist", None)
    return distribution is not None and distribution.metadata["Name"] == DISTRIBUTION


def _add(spec: BackendSpec) -> None:
    if not isinstance(spec, BackendSpec):
        raise TypeError(f"a backend declaration must be a BackendSpec, got {type(spec).__name__}")
    _SPECS[spec.name] = spec
    for alias in spec.aliases:
        _ALIASES[alias] = spec.name


def register_backend(spec: BackendSpec) -> None:
    """Registers a backend at run time after the core checks its declaration (a capability
    flagged True must bind an implementation: ``BackendCapabilityConformanceError`` otherwise)."""
    _discover()
    check_registration(spec)
    _add(spec)


def unregister_backend(name: str) -> None:
    """Removes a backend (tests register temporary ones)."""
    _discover()
    spec = _SPECS.pop(name, None)
    if spec is not None:
        for alias in spec.aliases:
            _ALIASES.pop(alias, None)
    _LOADED.pop(name, None)


def specs() -> List[BackendSpec]:
    """Every registered backend's spec."""
    _discover()
    return list(_SPECS.values())


def built_in_specs() -> List[BackendSpec]:
    """The backends this package declares itself (what the docs' capability matrix lists)."""
    _discover()
    return list(_BUILT_IN.values())


def names() -> List[str]:
    """Registered backend names."""
    _discover()
    return sorted(_SPECS)


def find_spec(name: str) -> Optional[BackendSpec]:
    """The spec registered under a name or alias, or None."""
    _discover()
    return _SPECS.get(_ALIASES.get(name, name))


def get_spec(name: str) -> BackendSpec:
    """The spec registered under a name or alias (``backend_unknown`` otherwise)."""
    spec = find_spec(name)
    if spec is None:
        raise BackendUnsupportedError(
            f"no backend named {name!r}; registered: {', '.join(names())}",
            "backend_unknown",
            "pass backend=None to route by model type, or one of the registered names",
            framework=name,
        )
    return spec


def require_framework(spec: BackendSpec) -> None:
    """Raises ``framework_not_installed`` when the backend's framework cannot be imported."""
    requirement = spec.requirement
    if requirement.module not in sys.modules and importlib.util.find_spec(requirement.module) is None:
        raise BackendUnsupportedError(
            f"the {spec.name} backend needs {requirement.module}, which is not installed",
            "framework_not_installed",
            f"pip install 'torchlens[{requirement.extra}]'",
            framework=spec.name,
        )


def get_backend(name: str) -> Any:
    """The protocol object of a backend (importing its framework now)."""
    spec = get_spec(name)
    if spec.name not in _LOADED:
        require_framework(spec)
        _LOADED[spec.name] = spec.protocol()
    return _LOADED[spec.name]


# ---- routing ---------------------------------------------------------------------------------


def _array_framework(value: Any) -> Optional[str]:
    """The framework (import name) whose array ``value`` is, when it is an array of a registered
    backend's framework (not a module, a function or a type)."""
    if isinstance(value, type):
        return None
    cls = type(value)
    root = cls.__module__.split(".", 1)[0]
    for spec in _SPECS.values():
        if root in spec.array_modules:
            # torch modules and functions live in torch too: only its tensors count as arrays.
            if root == "torch" and cls.__name__ not in ("Tensor", "Parameter"):
                return None
            return spec.requirement.module
    return None


def array_frameworks(value: Any, found: Optional[set] = None, depth: int = 0) -> set:
    """Frameworks (import names) whose arrays appear in ``value`` (nested tuples, lists, dicts)."""
    found = set() if found is None else found
    if depth > 8:
        return found
    framework = _array_framework(value)
    if framework is not None:
        found.add(framework)
    elif isinstance(value, (tuple, list)):
        for item in value:
            array_frameworks(item, found, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            array_frameworks(item, found, depth + 1)
    return found


def resolve(model: Any, inputs: Any, backend: Optional[str]) -> BackendSpec:
    """The backend for a call. Foreign arrays are checked first: a model is never routed to a
    backend whose framework differs from its inputs'. With ``backend=None`` each registered
    backend votes: a callable given only its framework's arrays is its (the one rule every
    backend follows, so no declaration writes it), and its detector recognises its own model
    types; no vote or a tie is a typed error, never a silent pick."""
    _discover()
    found = array_frameworks(inputs)
    if backend is not None:
        spec = get_spec(backend)
        # A backend that cannot run here says so first: its framework, then whether it is built.
        get_backend(spec.name)
        foreign = found - {spec.requirement.module}
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
        and (not found or spec.requirement.module in found)
        and ((callable(model) and found == {spec.requirement.module}) or spec.detect(model, inputs))
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
