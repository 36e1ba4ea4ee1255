"""What every backend's derived gradients share: the cap on per-op records, and saying why
per-op gradients are absent (a code and a warning) instead of returning an empty result."""

from __future__ import annotations

import warnings
from typing import Any


def check_intermediate_cap(count: int, cap: int) -> None:
    """Refuses to derive per-op gradients for more ops than ``max_intermediate_grads``."""
    from ..errors import LimitExceededError

    if count > cap:
        raise LimitExceededError(
            f"{count} ops would get intermediate gradients, more than max_intermediate_grads={cap}",
            "intermediate_grads_over_cap",
            "raise GradOptions.max_intermediate_grads, or leave intermediate_grads off",
        )


def mark_unavailable(autograd: Any, code: str, detail: str) -> None:
    """Per-op gradients are absent: ``autograd.intermediate_unavailable`` gets the code and a
    ``DerivedGradUnavailableWarning`` says why (pointing past the backend's own frames)."""
    from ..errors import DerivedGradUnavailableWarning

    autograd.intermediate_unavailable = code
    warnings.warn(
        f"[{code}] no per-op derived gradients: {detail}", DerivedGradUnavailableWarning, stacklevel=4
    )
