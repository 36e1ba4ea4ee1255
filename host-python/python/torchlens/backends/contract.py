"""The backend contract: what every backend declares (``BackendSpec``), the parts it provides
(``BackendProtocol``), and the capability gate. The closed code sets and the gate's logic live in
the core; this module exposes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ..errors import BackendUnsupportedError

MATURITIES = ("stable", "preview", "planned")


@dataclass(frozen=True)
class FrameworkRequirement:
    """Which framework a backend needs: the import name, the supported range
    ``[minimum, ceiling)``, the version CI pins, and the install extra."""

    module: str
    minimum: str
    ceiling: str
    pinned: str
    extra: str


@dataclass(frozen=True)
class BackendProtocol:
    """The parts a backend provides: capture, replay validation, a reference output computed
    with no wrapper installed, host copies of values, a realize-once hook for lazy frameworks,
    and the refusal codes it may raise."""

    requirement: FrameworkRequirement
    capabilities: Mapping[str, bool]
    capture: Callable[..., Any]
    validate: Callable[..., Any]
    reference_output: Callable[..., Any]
    host_copy: Callable[[Any], Any]
    realize: Callable[[Any], Any]
    refusal_codes: Tuple[str, ...]
    #: The adapter object: payload bytes in and out, runtime names.
    adapter: Any = None


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend."""

    name: str
    aliases: Tuple[str, ...]
    maturity: str
    requirement: FrameworkRequirement
    #: Capability name → flag; unlisted capabilities are False.
    capabilities: Mapping[str, bool] = field(default_factory=dict)
    #: Capability name → the callable that implements it.
    capability_implementations: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    #: Imports the adapter and returns its protocol object (None for a backend not built yet).
    load: Optional[Callable[[], BackendProtocol]] = None
    #: Cheap check, without importing the framework, that a model belongs to this backend.
    detect: Optional[Callable[[Any, Any], bool]] = None

    def declaration(self) -> tuple:
        """What the core's gate reads."""
        return (
            self.name,
            sorted(self.capabilities.items()),
            sorted(self.capability_implementations),
        )

    def protocol(self) -> BackendProtocol:
        """The backend's protocol object (imports its framework)."""
        if self.load is None:
            raise BackendUnsupportedError(
                f"the {self.name} backend is {self.maturity}: not built into this release yet",
                "backend_not_built",
                "use backend='torch', or follow the project for the backend's release",
                framework=self.name,
            )
        return self.load()


def gate(spec: BackendSpec, capability: str) -> None:
    """Raises unless ``spec`` may serve ``capability`` (fail-closed in both directions):
    ``BackendUnsupportedError`` for a False flag, ``BackendCapabilityConformanceError`` for a
    True flag without a bound implementation."""
    from .._core import core

    name, flags, implementations = spec.declaration()
    refusal = core().gate(name, flags, implementations, capability)
    if refusal is not None:
        raise BackendUnsupportedError(
            f"the {spec.name} backend does not support {capability}",
            refusal,
            "see docs/backends.md for what each backend supports",
            framework=spec.name,
        )


def gate_capture_request(spec: BackendSpec, save: Any, intervene: Any, stop_after: Any) -> Any:
    """The refusals every backend applies to a ``tl.trace`` call before anything runs:
    ``intervene=``, ``stop_after=``, and a ``save=`` selector whose class (value-dependent,
    temporal) the backend cannot decide. Returns the save selector, or None when ``save`` is
    None, True or False."""
    from .._core import core
    from ..selectors import as_selector

    if intervene is not None:
        gate(spec, "intervene")
    if stop_after is not None:
        gate(spec, "stop_after")
    if save is None or save is True or save is False:
        return None
    selector = as_selector(save)
    selector_class = core().classify_selector(selector.arena())
    if selector_class == "value-dependent":
        gate(spec, "save_value_dependent")
    elif selector_class == "temporal":
        gate(spec, "temporal_selectors")
    return selector


def check_registration(spec: BackendSpec) -> None:
    """Raises ``BackendCapabilityConformanceError`` when a True flag has no implementation."""
    from .._core import core

    if spec.maturity not in MATURITIES:
        raise ValueError(f"maturity must be one of {MATURITIES}")
    core().register_backend(*spec.declaration())


def refusal_codes() -> Dict[str, Tuple[str, str]]:
    """The closed set of refusal codes: code → (owner, meaning)."""
    from .._core import core

    return {code: (owner, meaning) for code, owner, meaning in core().refusal_codes()}


def validation_reasons() -> Dict[str, str]:
    """The closed set of validation reasons: code → meaning."""
    from .._core import core

    return dict(core().validation_reasons())


def capability_names() -> Tuple[str, ...]:
    from .._core import core

    return tuple(name for name, _, _ in core().capabilities())
