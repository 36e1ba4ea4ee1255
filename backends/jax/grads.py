"""Derived gradients of a JAX trace: leaf gradients of a loss through ``jax.grad`` of the
traced call, and optionally per-op gradients, each checked independently before it is exposed.
These are not a captured backward pass (``has_backward_pass`` stays False)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

import jax
import jax.numpy as jnp
from torchlens.errors import LimitExceededError
from torchlens.trace import Autograd, DerivedGrad

from .capture import ParamRef, ReplaySlot
from .refusals import refuse


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


def _default_loss(output: Any) -> Any:
    return sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(output))


def _loss(options: GradOptions) -> Callable[[Any], Any]:
    return options.loss_fn if options.loss_fn is not None else _default_loss


def _inexact(value: Any) -> bool:
    return hasattr(value, "dtype") and jnp.issubdtype(value.dtype, jnp.inexact)


def derive(trace: Any, options: GradOptions) -> Autograd:
    runtime = trace._runtime
    root = runtime.root
    dynamic = list(root.dynamic)
    count = len(root.params)
    if options.params is not None:
        leaves = [
            leaf
            for leaf in jax.tree_util.tree_leaves(options.params)
            if _inexact(leaf) or hasattr(leaf, "dtype")
        ]
        if len(leaves) != count:
            raise refuse(
                f"GradOptions.params has {len(leaves)} array leaves, the traced parameters {count}",
                "option_value_invalid",
                "pass the same parameter pytree the function was traced with",
            )
        dynamic[:count] = leaves
    loss_fn = _loss(options)
    wrt = [index for index in range(count) if _inexact(dynamic[index])]
    names = [f"params.{root.params[index][0]}" for index in wrt]
    argnums = set(options.input_grad_argnums)
    for offset, ((name, _), position) in enumerate(zip(root.inputs, root.input_positions)):
        if position in argnums and _inexact(dynamic[count + offset]):
            wrt.append(count + offset)
            names.append(f"inputs.{position}" + name[len(root.input_names[position]) :])

    def loss_of(chosen: List[Any]) -> Any:
        full = list(dynamic)
        for index, value in zip(wrt, chosen):
            full[index] = value
        return loss_fn(root.flat(*full))

    try:
        grads = jax.grad(loss_of)([dynamic[index] for index in wrt])
    except Exception as error:  # JAX's own refusal (reverse-mode of a while_loop, ...)
        raise refuse(
            f"jax.grad cannot differentiate the traced function: {str(error).splitlines()[0]}",
            "capability_unsupported",
            "differentiate a function without while_loop (use lax.scan or fori_loop with static bounds)",
        ) from error
    autograd = Autograd(dict(zip(names, grads)))
    if options.intermediate_grads:
        autograd.intermediate_derived_grads = _intermediate(trace, options, loss_fn)
    return autograd


def _evaluate(trace: Any, taps: Dict[int, Any], replace: Optional[tuple] = None) -> Any:
    """Re-evaluates the captured graph from its replay records (differentiably), adding
    ``taps[op]`` to each tapped op's value, or replacing one op's value (``replace``)."""
    capture = trace._runtime.capture
    params = capture.param_values
    values: Dict[int, Any] = {}
    region_results: Dict[int, list] = {}
    outputs = []
    for op in trace.ops:
        index = op.index
        if op.kind == "output":
            outputs.append(values[op._info["parents"][0][0]])
            continue
        if index in capture.regions:
            call, template, _ = capture.regions[index]
            region_results[index] = call(*_args(template, values, params))
            continue
        if index in capture.projections:
            boundary, position = capture.projections[index]
            value = region_results[boundary][position]
        elif index in capture.replays:
            call, _, template, position = capture.replays[index]
            value = call(*_args(template, values, params))[position]
        else:
            value = capture.values[index]
        if replace is not None and replace[0] == index:
            value = replace[1]
        elif index in taps:
            value = value + taps[index]
        values[index] = value
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(trace._runtime.output_tree), outputs)


def _args(template: tuple, values: Dict[int, Any], params: Dict[int, Any]) -> list:
    return [
        values[item.op]
        if isinstance(item, ReplaySlot)
        else params[item.tensor]
        if isinstance(item, ParamRef)
        else item
        for item in template
    ]


def _intermediate(trace: Any, options: GradOptions, loss_fn: Callable[[Any], Any]) -> Dict[str, Any]:
    """One all-tap ``jax.grad`` pass, then for each op an independent check: the gradient of
    the loss with the op's value replaced by a free variable, and a central finite difference
    along a random direction. Only ops passing both are exposed."""
    capture = trace._runtime.capture
    candidates = [
        op
        for op in trace.ops
        if op.kind == "compute" and op.index in capture.values and _inexact(capture.values[op.index])
    ]
    if len(candidates) > options.max_intermediate_grads:
        raise LimitExceededError(
            f"{len(candidates)} ops would get intermediate gradients, more than max_intermediate_grads="
            f"{options.max_intermediate_grads}",
            "intermediate_grads_over_cap",
            "raise GradOptions.max_intermediate_grads, or leave intermediate_grads off",
        )
    # The re-evaluated graph must reproduce the captured outputs before any record is exposed.
    from .replay import same

    try:
        rerun = jax.tree_util.tree_leaves(_evaluate(trace, {}))
    except Exception:
        return {}
    recorded = [capture.values[op._info["parents"][0][0]] for op in trace.outputs]
    if len(rerun) != len(recorded) or not all(same(a, b) for a, b in zip(rerun, recorded)):
        return {}
    zeros = {op.index: jnp.zeros_like(capture.values[op.index]) for op in candidates}
    try:
        tapped = jax.grad(lambda taps: loss_fn(_evaluate(trace, taps)))(zeros)
    except Exception:
        # The producer cannot run under jax.grad (a while_loop region, say): no records.
        return {}
    rng = np.random.default_rng(0)
    exposed: Dict[str, Any] = {}
    for op in candidates:
        value = capture.values[op.index]
        grad = tapped[op.index]

        def replaced(v: Any, index: int = op.index) -> Any:
            return loss_fn(_evaluate(trace, {}, (index, v)))

        try:
            oracle = jax.grad(replaced)(value)
        except Exception:
            continue
        if not np.allclose(
            np.asarray(grad, np.float64), np.asarray(oracle, np.float64), rtol=1e-4, atol=1e-5
        ):
            continue
        direction = jnp.asarray(rng.standard_normal(value.shape)).astype(value.dtype)
        step = 1e-3 * (1.0 + float(jnp.max(jnp.abs(value))))
        finite = (float(replaced(value + step * direction)) - float(replaced(value - step * direction))) / (
            2 * step
        )
        analytic = float(jnp.vdot(grad.astype(jnp.float32), direction.astype(jnp.float32)))
        if abs(finite - analytic) <= 2e-2 * (1.0 + abs(analytic)):
            exposed[op.label] = DerivedGrad(grad, "exact", ("boundary_replacement_grad", "finite_difference"))
    return exposed
