"""The capability gate, fail-closed in both directions: a False flag refuses with the capability's
code, a True flag admits only through a bound implementation. The closed code sets and the gate's
logic live in the core; this module asks it."""

from __future__ import annotations

from typing import Dict, Tuple

from ..errors import BackendUnsupportedError
from .spec import MATURITIES, BackendSpec


def gate(spec: BackendSpec, capability: str) -> None:
    """Raises unless ``spec`` may serve ``capability``: ``BackendUnsupportedError`` for a False
    flag, ``BackendCapabilityConformanceError`` for a True flag without a bound implementation."""
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
    """Every capability of the backend contract, as the core lists them."""
    from .._core import core

    return tuple(name for name, _, _ in core().capabilities())
