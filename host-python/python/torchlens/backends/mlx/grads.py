"""Derived gradients of an MLX trace: leaf gradients of a loss through MLX's own autodiff
(``mx.value_and_grad``). They are not a captured backward pass (``has_backward_pass`` stays
False).

For an ``mlx.nn.Module`` root the gradients are taken over ``model.parameters()``, rebound with
``model.update(params)`` in the rerun (and restored after); the rerun's output must match the
captured output within dtype tolerance, or the call refuses. Per-op gradients
(``intermediate_grads=True``) are not built yet: asking for them leaves
``intermediate_derived_grads`` empty with ``intermediate_unavailable`` set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from torchlens.adapter_kit.replay import values_match
from torchlens.trace import Autograd

from .refusals import refuse

#: Why per-op derived gradients are absent (``trace.autograd.intermediate_unavailable``).
INTERMEDIATE_NOT_BUILT = "intermediate_grads_not_built"


@dataclass(frozen=True)
class GradOptions:
    """What to differentiate: ``loss_fn(output) -> scalar mx.array`` (default: the sum of every
    output array), which positional inputs get gradients (``input_grad_argnums``), and whether
    to derive per-op gradients (at most ``max_intermediate_grads`` ops)."""

    loss_fn: Optional[Callable[[Any], Any]] = None
    input_grad_argnums: Sequence[int] = ()
    intermediate_grads: bool = False
    max_intermediate_grads: int = 256


def _loss(options: GradOptions, output: Any) -> Any:
    if options.loss_fn is not None:
        return options.loss_fn(output)
    from .adapter import output_pairs

    total = None
    for _, leaf in output_pairs(output):
        part = leaf.astype(mx.float32).sum()
        total = part if total is None else total + part
    return total


def derive(trace: Any, options: GradOptions) -> Autograd:
    """Leaf gradients of ``options``' loss for the trace's call (parameters and chosen inputs)."""
    runtime = trace._runtime
    model, args, kwargs = runtime.model, tuple(runtime.args), dict(runtime.kwargs or {})
    argnums = tuple(options.input_grad_argnums)
    for index in argnums:
        if index >= len(args) or not isinstance(args[index], mx.array):
            raise refuse(
                f"input_grad_argnums names argument {index}, which is not an mx.array",
                "option_unsupported",
                "name positional arguments that are mx.array inputs",
            )
    is_module = isinstance(model, nn.Module)
    original = model.parameters() if is_module else None
    captured = [op.out for op in trace.outputs]

    def objective(params: Any, *inputs: Any) -> Any:
        call_args = list(args)
        for index, value in zip(argnums, inputs):
            call_args[index] = value
        if is_module:
            model.update(params)
        output = model(*call_args, **kwargs)
        return _loss(options, output), output

    try:
        grad_fn = mx.value_and_grad(lambda p, *i: objective(p, *i)[0], argnums=tuple(range(1 + len(argnums))))
        output = objective(original if is_module else {}, *(args[i] for i in argnums))[1]
        from .adapter import output_pairs

        rerun = [leaf for _, leaf in output_pairs(output)]
        for before, after, op in zip(captured, rerun, trace.outputs):
            if before is not None and not values_match(trace._backend, after, before, op.dtype):
                raise refuse(
                    "the gradient rerun's output differs from the captured forward",
                    "capability_unsupported",
                    "make the forward deterministic (no state changed between calls)",
                )
        _, grads = grad_fn(original if is_module else {}, *(args[i] for i in argnums))
    finally:
        if is_module:
            model.update(original)
    derived = {}
    if is_module:
        for address, value in tree_flatten(grads[0]):
            derived[f"params.{address}"] = value
    for index, value in zip(argnums, grads[1:]):
        derived[f"inputs.{index}"] = value
    mx.eval(list(derived.values()))
    autograd = Autograd(derived_grads=derived)
    if options.intermediate_grads:
        autograd.intermediate_unavailable = INTERMEDIATE_NOT_BUILT
    return autograd
