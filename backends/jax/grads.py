"""Derived gradients of a JAX trace: leaf gradients of a loss through ``jax.grad`` of the
traced call, and optionally per-op gradients, each checked independently before it is exposed;
driven by the kit's driver (:mod:`torchlens.adapter_kit.derived_grads`). These are not a
captured backward pass (``has_backward_pass`` stays False).

Per-op gradients come from the captured graph itself, re-evaluated differentiably from its
replay records (so there is no structural match to make): the re-evaluation must reproduce the
captured outputs, one all-tap ``jax.grad`` gives every op's gradient, and each must then agree
with the gradient of the loss with that op's value replaced by a free variable and with a central
finite difference along a random direction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from torchlens.adapter_kit import derived_grads as kit
from torchlens.adapter_kit.derived_grads import (
    INTERMEDIATE_GRAD_UNSUPPORTED,
    INTERMEDIATE_REPLAY_DIVERGED,
    INTERMEDIATE_REPLAY_FAILED,
)
from torchlens.adapter_kit.program_import import rerun
from torchlens.errors import TorchLensError
from torchlens.trace import Autograd

from .refusals import refuse

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


class _Hooks(kit.GradHooks):
    evidence = ("boundary_replacement_grad", "finite_difference")
    loss_kind = "scalar jax.Array"
    loss_remedy = "pass GradOptions(loss_fn=lambda output: jnp.sum(output))"

    def __init__(self, trace: Any, options: GradOptions) -> None:
        super().__init__(trace, options)
        self.rng = np.random.default_rng(0)
        #: Set by :meth:`op_pass` for :meth:`oracle`.
        self._loss_of: Optional[Callable[[Any], Any]] = None

    def output_leaves(self, output: Any) -> List[Any]:
        return jax.tree_util.tree_leaves(output)

    def loss_part(self, leaf: Any) -> Any:
        return jnp.sum(leaf)

    def is_scalar(self, loss: Any) -> bool:
        # The loss is a tracer under jax.grad: its shape is known, its value is not.
        return isinstance(loss, (jax.Array, float, int)) and jnp.size(loss) == 1

    def captured(self) -> List[kit.CapturedOp]:
        """The compute ops with a recorded floating value (keyed by value id)."""
        recorded = self.trace._runtime.values
        return [
            kit.CapturedOp(op.label, (), True, op._info["value"])
            for op in self.trace.ops
            if op.kind == "compute" and op._info["value"] in recorded and inexact(recorded[op._info["value"]])
        ]

    def captured_outputs(self) -> List[Tuple[Any, str]]:
        recorded = self.trace._runtime.values
        return [(recorded[op.parents[0]._info["value"]], op.dtype) for op in self.trace.outputs]

    def leaf_pass(self, loss_of: Callable[[Any], Any], per_op: bool) -> kit.GradPass:
        """``jax.grad`` of the traced call over the parameters and the chosen inputs."""
        options = self.options
        root = self.trace._runtime.root
        dynamic = list(root.dynamic)
        count = len(root.params)
        if options.params is not None:
            leaves = [
                leaf
                for leaf in jax.tree_util.tree_leaves(options.params)
                if inexact(leaf) or hasattr(leaf, "dtype")
            ]
            if len(leaves) != count:
                raise refuse(
                    f"GradOptions.params has {len(leaves)} array leaves, the traced parameters {count}",
                    "option_value_invalid",
                    "pass the same parameter pytree the function was traced with",
                )
            dynamic[:count] = leaves
        wrt = [index for index in range(count) if inexact(dynamic[index])]
        names = [kit.param_target(root.params[index][0]) for index in wrt]
        argnums = set(options.input_grad_argnums)
        for offset, ((name, _), position) in enumerate(zip(root.inputs, root.input_positions)):
            if position in argnums and inexact(dynamic[count + offset]):
                wrt.append(count + offset)
                names.append(kit.input_target(position, name[len(root.input_names[position]) :]))

        def loss_at(chosen: List[Any]) -> Any:
            full = list(dynamic)
            for index, value in zip(wrt, chosen):
                full[index] = value
            return loss_of(root.flat(*full))

        try:
            grads = jax.grad(loss_at)([dynamic[index] for index in wrt])
        except TorchLensError:
            raise  # our own refusal (of the loss), not JAX's
        except Exception as error:  # JAX's own refusal (reverse-mode of a while_loop, ...)
            raise refuse(
                f"jax.grad cannot differentiate the traced function: {str(error).splitlines()[0]}",
                "capability_unsupported",
                "differentiate a function without while_loop (use lax.scan or fori_loop with static bounds)",
            ) from error
        return kit.GradPass(grads=dict(zip(names, grads)))

    def op_pass(self, loss_of: Callable[[Any], Any]) -> kit.GradPass:
        """The captured graph re-evaluated, then one all-tap ``jax.grad``."""
        trace = self.trace
        self._loss_of = loss_of
        try:
            rerun = jax.tree_util.tree_leaves(_evaluate(trace, {}))
        except Exception as error:
            raise kit.Unavailable(
                INTERMEDIATE_REPLAY_FAILED, f"re-evaluating the graph raised {error!r}"
            ) from error
        recorded = trace._runtime.values
        keys = [op.key for op in self.captured()]
        zeros = {key: jnp.zeros_like(recorded[key]) for key in keys}
        if not kit.reproduces(self, rerun):
            # The driver withholds every record; do not differentiate a graph that diverged.
            return kit.GradPass(outputs=rerun, op_grads=[])
        try:
            tapped = jax.grad(lambda taps: loss_of(_evaluate(trace, taps)))(zeros)
        except Exception as error:
            # The producer cannot run under jax.grad (a while_loop region, say).
            raise kit.Unavailable(
                INTERMEDIATE_GRAD_UNSUPPORTED, f"jax.grad of the graph raised {error!r}"
            ) from error
        return kit.GradPass(outputs=rerun, op_grads=[tapped[key] for key in keys])

    def oracle(self, index: int, op: kit.CapturedOp, grad: Any) -> bool:
        """The gradient of the loss with this op's value replaced by a free variable, and a
        central finite difference along a random direction, both agree with ``grad``."""
        assert self._loss_of is not None  # set by op_pass, which runs first
        loss_of, trace, value_id = self._loss_of, self.trace, op.key
        value = trace._runtime.values[value_id]

        def replaced(v: Any) -> Any:
            return loss_of(_evaluate(trace, {}, (value_id, v)))

        try:
            oracle = jax.grad(replaced)(value)
        except Exception:
            return False
        if not np.allclose(
            np.asarray(grad, np.float64), np.asarray(oracle, np.float64), rtol=1e-4, atol=1e-5
        ):
            return False
        direction = jnp.asarray(self.rng.standard_normal(value.shape)).astype(value.dtype)
        step = 1e-3 * (1.0 + float(jnp.max(jnp.abs(value))))
        finite = (float(replaced(value + step * direction)) - float(replaced(value - step * direction))) / (
            2 * step
        )
        analytic = float(jnp.vdot(grad.astype(jnp.float32), direction.astype(jnp.float32)))
        return abs(finite - analytic) <= 2e-2 * (1.0 + abs(analytic))


def derive(trace: Any, options: GradOptions) -> Autograd:
    """The derived gradients of a live trace (``CaptureOptions(grad_options=...)``)."""
    return kit.derive(_Hooks(trace, options))


def _intermediate(
    trace: Any, options: GradOptions, loss_fn: Callable[[Any], Any], autograd: Autograd
) -> None:
    """Sets ``autograd``'s per-op records alone (the driver's per-op stage). ``loss_fn`` is
    the loss ``options`` gives (the hooks build it from ``options``); it stays in the
    signature for callers that pass it."""
    kit.attach_intermediate(_Hooks(trace, options), autograd)


def _evaluate(trace: Any, taps: Dict[int, Any], replace: Optional[tuple] = None) -> Any:
    """The captured graph re-evaluated differentiably (the kit's ``rerun``: ``taps`` added,
    or one value replaced), as the function's output pytree."""
    outputs = rerun(trace, taps, replace)
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(trace._runtime.output_tree), outputs)
