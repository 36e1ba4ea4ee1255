"""The capability gate, fail-closed in both directions: a False flag refuses with the capability's
code, a True flag admits only through a bound implementation. The closed code sets and the gate's
logic live in the core; this module asks it. It sits below :mod:`torchlens.backends` (the registry
checks a declaration here, and a trace gates its own queries here), so it imports nothing above
the core."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Tuple

from ._core import core
from .errors import BackendUnsupportedError

if TYPE_CHECKING:
    from .backends.spec import BackendSpec


def gate(spec: BackendSpec, capability: str) -> None:
    """Raises unless ``spec`` may serve ``capability``: ``BackendUnsupportedError`` for a False
    flag, ``BackendCapabilityConformanceError`` for a True flag without a bound implementation."""
    name, flags, implementations = spec.declaration()
    refusal = core().gate(name, flags, implementations, capability)
    if refusal is not None:
        raise BackendUnsupportedError(
            f"the {spec.name} backend does not support {capability}",
            refusal,
            "see docs/backends.md for what each backend supports",
            framework=spec.name,
        )


def refusal_codes() -> Dict[str, Tuple[str, str]]:
    """The closed set of refusal codes: code → (owner, meaning)."""
    return {code: (owner, meaning) for code, owner, meaning in core().refusal_codes()}


def validation_reasons() -> Dict[str, str]:
    """The closed set of validation reasons: code → meaning."""
    return dict(core().validation_reasons())


def capability_names() -> Tuple[str, ...]:
    """Every capability of the backend contract, as the core lists them."""
    return tuple(name for name, _, _ in core().capabilities())
