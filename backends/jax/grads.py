"""Derived gradients of a JAX trace: leaf gradients of a loss through ``jax.grad`` of the
traced call, and optionally per-op gradients, each checked independently before it is exposed;
driven by the kit's driver (:mod:`torchlens.adapter_kit.derived_grads`). These are not a
captured backward pass (``has_backward_pass`` stays False).

Per-op gradients are the kit's (:mod:`torchlens.adapter_kit.rerun_grads`): the captured graph
re-evaluated from its replay records, one all-tap ``jax.grad``, each op's gradient checked by a
replaced-value gradient and a finite difference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from torchlens.adapter_kit import derived_grads as kit
from torchlens.adapter_kit.derived_grads import (
    INTERMEDIATE_GRAD_UNSUPPORTED,
    INTERMEDIATE_REPLAY_DIVERGED,
    INTERMEDIATE_REPLAY_FAILED,
)
from torchlens.adapter_kit.rerun_grads import RerunGradHooks
from torchlens.trace import Autograd

__all__ = [
    "GradOptions",
    "INTERMEDIATE_GRAD_UNSUPPORTED",
    "INTERMEDIATE_REPLAY_DIVERGED",
    "INTERMEDIATE_REPLAY_FAILED",
    "derive",
]


@dataclass(frozen=True)
class GradOptions:
    """What to differentiate: ``loss_fn(output) -> scalar`` (default: the sum of every output
    leaf), the parameter pytree (default: the traced one), which positional inputs to
    differentiate (``input_grad_argnums``, 0 = the first input after the parameters), and
    whether to derive per-op gradients (at most ``max_intermediate_grads`` ops)."""

    loss_fn: Optional[Callable[[Any], Any]] = None
    params: Any = None
    input_grad_argnums: Sequence[int] = ()
    intermediate_grads: bool = False
    max_intermediate_grads: int = 256


def inexact(value: Any) -> bool:
    """Whether ``value`` has an inexact (floating or complex) dtype."""
    return hasattr(value, "dtype") and jnp.issubdtype(value.dtype, jnp.inexact)


class GradHooks(RerunGradHooks):
    """JAX's side of the kit's derived-gradient driver."""

    loss_kind = "scalar jax.Array"
    loss_remedy = "pass GradOptions(loss_fn=lambda output: jnp.sum(output))"

    grad_name = "jax.grad"
    grad_remedy = "differentiate a function without while_loop (use lax.scan or fori_loop with static bounds)"

    differentiable = staticmethod(inexact)
    zeros_like = staticmethod(jnp.zeros_like)

    def grad(self, function: Callable[[Any], Any], at: Any) -> Any:
        return jax.grad(function)(at)

    def structured(self, outputs: List[Any]) -> Any:
        tree = jax.tree_util.tree_structure(self.trace._runtime.output_tree)
        return jax.tree_util.tree_unflatten(tree, outputs)

    def array_like(self, array: np.ndarray, like: Any) -> Any:
        return jnp.asarray(array).astype(like.dtype)

    def param_leaves(self, tree: Any) -> List[Any]:
        return [leaf for leaf in jax.tree_util.tree_leaves(tree) if inexact(leaf) or hasattr(leaf, "dtype")]

    def output_leaves(self, output: Any) -> List[Any]:
        return jax.tree_util.tree_leaves(output)

    def loss_part(self, leaf: Any) -> Any:
        return jnp.sum(leaf)

    def is_scalar(self, loss: Any) -> bool:
        # The loss is a tracer under jax.grad: its shape is known, its value is not.
        return isinstance(loss, (jax.Array, float, int)) and jnp.size(loss) == 1


def derive(trace: Any, options: GradOptions) -> Autograd:
    """The derived gradients of a live trace (``CaptureOptions(grad_options=...)``)."""
    return kit.derive(GradHooks(trace, options))


def _intermediate(
    trace: Any, options: GradOptions, loss_fn: Callable[[Any], Any], autograd: Autograd
) -> None:
    """Sets ``autograd``'s per-op records alone (the driver's per-op stage). ``loss_fn`` is
    the loss ``options`` gives (the hooks build it from ``options``); it stays in the
    signature for callers that pass it."""
    kit.attach_intermediate(GradHooks(trace, options), autograd)
