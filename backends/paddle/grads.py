"""Derived gradients of a Paddle trace: leaf gradients of a loss through Paddle's own autodiff
(``paddle.grad``), and optionally per-op gradients from a guarded second AD replay. These are not
a captured backward pass (``has_backward_pass`` stays False).

* Leaf gradients: the call runs again with nothing installed, on detached copies of the chosen
  inputs (``stop_gradient=False``); ``paddle.grad`` gives the gradients of every trainable
  parameter and of those inputs. ``paddle.grad`` accumulates nothing into ``.grad``, so nothing
  the user holds changes.
* Per-op gradients (``intermediate_grads=True``): the call runs once more with the capture's
  recorder installed on a shadow session (nothing goes to the core), then ``paddle.grad`` of the
  loss with respect to every recorded floating op output. A record is exposed only when that
  replay is an exact, unambiguous structural match of the capture (same functions, shapes and
  parents, in the same order) and reproduces the captured outputs; otherwise nothing is attached
  and ``trace.autograd.intermediate_unavailable`` says why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import paddle

from torchlens.adapter_kit.derived_grads import check_intermediate_cap, mark_unavailable
from torchlens.adapter_kit.replay import values_match
from torchlens.adapter_kit.wrappers import Patches
from torchlens.trace import Autograd, DerivedGrad

from . import refusals
from .capture import Recorder, tensors_of

#: Why per-op derived gradients are absent (``trace.autograd.intermediate_unavailable``).
INTERMEDIATE_REPLAY_DIVERGED = "intermediate_replay_diverged"
INTERMEDIATE_REPLAY_FAILED = "intermediate_replay_failed"


@dataclass(frozen=True)
class GradOptions:
    """What to differentiate: ``loss_fn(output) -> scalar Tensor`` (default: the sum of every
    floating output), which positional inputs get gradients (``input_grad_argnums``), and
    whether to derive per-op gradients (at most ``max_intermediate_grads`` ops)."""

    loss_fn: Optional[Callable[[Any], Any]] = None
    input_grad_argnums: Sequence[int] = ()
    intermediate_grads: bool = False
    max_intermediate_grads: int = 256


def _floating(tensor: Any) -> bool:
    return isinstance(tensor, paddle.Tensor) and tensor.dtype in (
        paddle.float16,
        paddle.bfloat16,
        paddle.float32,
        paddle.float64,
    )


def _loss(options: GradOptions, output: Any) -> Any:
    if options.loss_fn is not None:
        loss = options.loss_fn(output)
    else:
        parts = [leaf.astype("float32").sum() for leaf in tensors_of(output) if _floating(leaf)]
        loss = paddle.add_n(parts) if len(parts) > 1 else parts[0] if parts else None
    if not isinstance(loss, paddle.Tensor) or loss.size != 1:
        raise refusals.value_invalid(
            "the loss must be a scalar paddle.Tensor",
            "pass GradOptions(loss_fn=lambda output: paddle.sum(output))",
        )
    return loss


def check_options(options: GradOptions, args: tuple) -> None:
    """Refuses input positions that are not floating Tensor arguments, before anything runs."""
    for position in options.input_grad_argnums:
        if position >= len(args) or not _floating(args[position]):
            raise refusals.value_invalid(
                f"input_grad_argnums names position {position}, which is not a floating "
                "paddle.Tensor argument",
                "name the positions of floating Tensor inputs, for example input_grad_argnums=(0,)",
            )


def _chosen_inputs(args: tuple, options: GradOptions) -> Tuple[list, List[Tuple[str, Any]]]:
    """The call's arguments with each chosen input replaced by a differentiable detached copy."""
    call_args = list(args)
    chosen: List[Tuple[str, Any]] = []
    check_options(options, args)
    for position in options.input_grad_argnums:
        copy = args[position].detach()
        copy.stop_gradient = False
        call_args[position] = copy
        chosen.append((f"inputs.{position}", copy))
    return call_args, chosen


def derive(trace: Any, options: GradOptions) -> Autograd:
    """The derived gradients of a live trace (``CaptureOptions(grad_options=...)``)."""
    runtime = trace._runtime
    args, kwargs = runtime.args, runtime.kwargs
    params = [
        (address, runtime.params[param.value_id])
        for address, param in _param_ids(trace, runtime).items()
        if _floating(runtime.params[param.value_id]) and not runtime.params[param.value_id].stop_gradient
    ]
    call_args, chosen = _chosen_inputs(args, options)
    targets = [(f"params.{address}", tensor) for address, tensor in params] + chosen
    loss = _loss(options, runtime.model(*call_args, **kwargs))
    grads = paddle.grad([loss], [tensor for _, tensor in targets], allow_unused=True) if targets else []
    autograd = Autograd({name: grad for (name, _), grad in zip(targets, grads) if grad is not None})
    if options.intermediate_grads:
        _intermediate(trace, options, autograd)
    return autograd


class _ParamId:
    __slots__ = ("value_id",)

    def __init__(self, value_id: int) -> None:
        self.value_id = value_id


def _param_ids(trace: Any, runtime: Any) -> Dict[str, _ParamId]:
    """Parameter address → its value id, in declaration order."""
    by_tensor = {id(tensor): value_id for value_id, tensor in runtime.params.items()}
    found: Dict[str, _ParamId] = {}
    model = runtime.model
    if isinstance(model, paddle.nn.Layer):
        for address, param in model.named_parameters():
            value_id = by_tensor.get(id(param))
            if value_id is not None and address not in found:
                found[address] = _ParamId(value_id)
    return found


class _ShadowSession:
    """Stands in for the capture session in the per-op pass: it hands out ids and remembers each
    op's signature and value, and sends nothing to the core."""

    def __init__(self) -> None:
        self._next = 1
        self.ops: List[Tuple[int, str, tuple, List[int], Any]] = []

    def new_value_id(self) -> int:
        value_id = self._next
        self._next += 1
        return value_id

    def op(self, func: str, parents: list, outputs: list, *args: Any, **kwargs: Any) -> None:
        for value_id, value, shape, _dtype in outputs:
            self.ops.append((value_id, func, tuple(shape), [parent for parent, _ in parents], value))

    def _ignore(self, *args: Any, **kwargs: Any) -> None:
        pass

    module = param = input = constant = buffer = enter = exit = output = extra = mark_unverified = _ignore


def _intermediate(trace: Any, options: GradOptions, autograd: Autograd) -> None:
    runtime = trace._runtime
    captured = [op for op in trace.ops if op.kind in ("compute", "literal_producer")]
    floating = [op for op in captured if op.dtype.startswith(("float", "bfloat"))]
    check_intermediate_cap(len(floating), options.max_intermediate_grads)
    shadow = _ShadowSession()
    call_args, _chosen = _chosen_inputs(runtime.args, options)
    try:
        with Patches() as patches:
            recorder = Recorder(shadow, patches)
            if isinstance(runtime.model, paddle.nn.Layer):
                recorder.declare_layers(runtime.model)
            recorder.install(patches)
            output = runtime.model(*call_args, **runtime.kwargs)
        loss = _loss(options, output)
        wanted = [
            (value_id, value)
            for value_id, _func, _shape, _parents, value in shadow.ops
            if _floating(value) and not value.stop_gradient
        ]
        grads = paddle.grad([loss], [value for _, value in wanted], allow_unused=True) if wanted else []
    except Exception as error:
        mark_unavailable(autograd, INTERMEDIATE_REPLAY_FAILED, f"the gradient pass raised {error!r}")
        return
    by_id = {value_id: grad for (value_id, _), grad in zip(wanted, grads)}
    # exact, unambiguous: the same ops with the same functions and shapes, in order
    signature = [(op.func_name, tuple(op.shape)) for op in captured]
    replayed = [(func, shape) for _, func, shape, _, _ in shadow.ops]
    if signature != replayed:
        mark_unavailable(autograd, INTERMEDIATE_REPLAY_DIVERGED, "the gradient pass ran a different graph")
        return
    adapter = trace._backend
    outputs = tensors_of(output)
    expected = [op.out for op in trace.outputs]
    if len(outputs) != len(expected) or not all(
        value is not None and values_match(adapter, got, value, op.dtype)
        for got, value, op in zip(outputs, expected, trace.outputs)
    ):
        mark_unavailable(
            autograd, INTERMEDIATE_REPLAY_DIVERGED, "the gradient pass does not reproduce the outputs"
        )
        return
    exposed: Dict[str, Any] = {}
    for op, (value_id, _, _, _, _) in zip(captured, shadow.ops):
        grad = by_id.get(value_id)
        if grad is not None and op.dtype.startswith(("float", "bfloat")):
            exposed[op.label] = DerivedGrad(grad, "exact", ("structural_match", "paddle_grad"))
    autograd.intermediate_derived_grads = exposed
