"""What an MLX capture refuses, each with a stable code and a remedy. The entry checks run
before the model is called; the forward-time checks raise from the wrappers the capture
installs, before the refused call does anything (no random number is drawn)."""

from __future__ import annotations

from typing import Any, Tuple

import mlx.core as mx

from torchlens.adapter_kit.refusals import Refusals
from torchlens.errors import BackendUnsupportedError

#: ``CaptureOptions.extra`` key: ``"refuse"`` turns the unwrapped-output ceiling into a refusal.
ON_UNWRAPPED = "mlx_on_unwrapped_op"


#: This backend's typed refusals, built by the kit the same way for every backend.
REFUSALS = Refusals("mlx")
refuse, option, value_invalid = REFUSALS.refuse, REFUSALS.option, REFUSALS.value_invalid


def gc_func_type() -> Any:
    """The type of what ``mx.compile``, ``mx.grad`` and ``mx.vmap`` return."""
    return type(mx.compile(_identity))


def _identity(x: Any) -> Any:
    return x


def check_root(model: Any) -> None:
    """A root wrapped by ``mx.compile``, ``mx.grad`` or ``mx.vmap`` refuses before it runs: the
    transform runs the function's operations where no wrapper sees them."""
    if isinstance(model, gc_func_type()):
        raise refuse(
            "the model is wrapped by mx.compile, mx.grad or mx.vmap; the transform runs its "
            "operations outside the wrappers",
            "mlx_transform_at_entry",
            "trace the plain function or module the transform wraps",
        )


def rng(name: str) -> BackendUnsupportedError:
    return refuse(
        f"the forward draws random numbers (mx.random.{name}); replay would draw them again",
        "rng_state_in_graph",
        "draw the random array outside the traced call and pass it in, or call model.eval() "
        "to turn dropout off",
    )


def unwrapped(what: str) -> BackendUnsupportedError:
    return refuse(
        f"an array no wrapped operation produced reached the capture ({what})",
        "unwrapped_op_in_capture",
        "build the array outside the traced call and pass it in, or use a wrapped mx function",
    )


#: Selector kinds that refuse on MLX (checked before the forward runs).
_REFUSED_KINDS: Tuple[Tuple[str, str, str], ...] = (
    ("model_output", "capability_unsupported", "tl.model_output(...)"),
    ("where", "value_dependent_predicate", "tl.where(...)"),
    ("followed_by", "followed_by_unsupported", "tl.followed_by(...)"),
    ("preceded_by", "followed_by_unsupported", "tl.preceded_by(...)"),
)
