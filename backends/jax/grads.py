"""Derived gradients of a JAX trace: leaf gradients of a loss through ``jax.grad`` of the
traced call, and optionally per-op gradients, each checked independently before it is exposed.
These are not a captured backward pass (``has_backward_pass`` stays False)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from torchlens.adapter_kit.derived_grads import check_intermediate_cap, mark_unavailable
from torchlens.adapter_kit.replay import ReplayRecord, ValueRef, fill, values_match
from torchlens.trace import Autograd, DerivedGrad

from .refusals import refuse

#: Why per-op derived gradients are absent (``trace.autograd.intermediate_unavailable``).
INTERMEDIATE_REPLAY_FAILED = "intermediate_replay_failed"
INTERMEDIATE_REPLAY_DIVERGED = "intermediate_replay_diverged"
INTERMEDIATE_GRAD_UNSUPPORTED = "intermediate_grad_unsupported"


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
        _intermediate(trace, options, loss_fn, autograd)
    return autograd


def _evaluate(trace: Any, taps: Dict[int, Any], replace: Optional[tuple] = None) -> Any:
    """Re-evaluates the captured graph from its replay records (differentiably), adding
    ``taps[value]`` to each tapped value, or replacing one value (``replace``). Keys are the
    adapter's value ids."""
    runtime = trace._runtime
    records, recorded, params = runtime.records, runtime.values, runtime.params
    values: Dict[int, Any] = {}
    region_results: Dict[int, list] = {}
    outputs = []

    def lookup(reference: ValueRef) -> Any:
        return params[reference.value] if reference.value in params else values[reference.value]

    for op in trace.ops:
        value_id = op._info["value"]
        if op.kind == "output":
            outputs.append(values[op.parents[0]._info["value"]])
            continue
        record: Optional[ReplayRecord] = records.get(value_id)
        if record is None:
            value = recorded[value_id]
        elif record.opaque:
            continue
        else:
            # A region's projections share one run of the region.
            key = id(record.call)
            if key not in region_results or not record.seam:
                region_results[key] = record.call(*fill(record.args, lookup))
            value = region_results[key][record.output_index]
        if replace is not None and replace[0] == value_id:
            value = replace[1]
        elif value_id in taps:
            value = value + taps[value_id]
        values[value_id] = value
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(runtime.output_tree), outputs)


def _intermediate(
    trace: Any, options: GradOptions, loss_fn: Callable[[Any], Any], autograd: Autograd
) -> None:
    """One all-tap ``jax.grad`` pass, then for each op an independent check: the gradient of
    the loss with the op's value replaced by a free variable, and a central finite difference
    along a random direction. Only ops passing both are exposed."""
    runtime = trace._runtime
    recorded = runtime.values
    candidates = [
        op
        for op in trace.ops
        if op.kind == "compute" and op._info["value"] in recorded and _inexact(recorded[op._info["value"]])
    ]
    check_intermediate_cap(len(candidates), options.max_intermediate_grads)
    # The re-evaluated graph must reproduce the captured outputs before any record is exposed.
    adapter = trace._backend
    try:
        rerun = jax.tree_util.tree_leaves(_evaluate(trace, {}))
    except Exception as error:
        mark_unavailable(autograd, INTERMEDIATE_REPLAY_FAILED, f"re-evaluating the graph raised {error!r}")
        return
    expected = [(recorded[op.parents[0]._info["value"]], op.dtype) for op in trace.outputs]
    if len(rerun) != len(expected) or not all(
        values_match(adapter, a, b, dtype) for a, (b, dtype) in zip(rerun, expected)
    ):
        mark_unavailable(
            autograd, INTERMEDIATE_REPLAY_DIVERGED, "the re-evaluated graph does not reproduce the outputs"
        )
        return
    zeros = {op._info["value"]: jnp.zeros_like(recorded[op._info["value"]]) for op in candidates}
    try:
        tapped = jax.grad(lambda taps: loss_fn(_evaluate(trace, taps)))(zeros)
    except Exception as error:
        # The producer cannot run under jax.grad (a while_loop region, say).
        mark_unavailable(autograd, INTERMEDIATE_GRAD_UNSUPPORTED, f"jax.grad of the graph raised {error!r}")
        return
    rng = np.random.default_rng(0)
    exposed: Dict[str, Any] = {}
    for op in candidates:
        value_id = op._info["value"]
        value = recorded[value_id]
        grad = tapped[value_id]

        def replaced(v: Any, value_id: int = value_id) -> Any:
            return loss_fn(_evaluate(trace, {}, (value_id, v)))

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
    autograd.intermediate_derived_grads = exposed
