"""Derived gradients of a TensorFlow trace: one auxiliary forward under a persistent
``tf.GradientTape``. These are not a captured backward pass (``has_backward_pass`` stays False).

The call runs once more with the capture's recorder installed on a shadow session (nothing goes
to the core); the tape watches the floating inputs and the trainable variables of
``trace.params`` explicitly. The auxiliary output must equal the captured output, or the call
refuses (``derived_grad_replay_diverged``). One ``tape.gradient`` then gives the gradients of
the floating inputs (``inputs.<n>``) and the variables (``params.<address>``). With
``intermediate_grads=True`` every floating op output of the auxiliary forward is a gradient
target too; a per-op record is attached only when the auxiliary forward is an exact, unambiguous
structural match of the capture (same functions, shapes and parents, in order), otherwise
``trace.autograd.intermediate_unavailable`` says why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from torchlens.adapter_kit.derived_grads import check_intermediate_cap, mark_unavailable
from torchlens.adapter_kit.replay import values_match
from torchlens.adapter_kit.wrappers import Patches
from torchlens.errors import CaptureError
from torchlens.trace import Autograd, DerivedGrad

from . import refusals
from .capture import Recorder, is_module, tensors_of

#: Why per-op derived gradients are absent (``trace.autograd.intermediate_unavailable``).
INTERMEDIATE_REPLAY_DIVERGED = "intermediate_replay_diverged"


@dataclass(frozen=True)
class GradOptions:
    """What to differentiate: ``loss_fn(output) -> scalar tf.Tensor`` (default: the sum of every
    floating output), and whether to derive per-op gradients (at most
    ``max_intermediate_grads`` ops)."""

    loss_fn: Optional[Callable[[Any], Any]] = None
    intermediate_grads: bool = False
    max_intermediate_grads: int = 256


def _floating(tensor: Any) -> bool:
    return getattr(tensor, "dtype", None) is not None and tensor.dtype.is_floating


def _loss(options: GradOptions, output: Any) -> Any:
    if options.loss_fn is not None:
        loss = options.loss_fn(output)
    else:
        parts = [tf.reduce_sum(tf.cast(leaf, tf.float32)) for leaf in tensors_of(output) if _floating(leaf)]
        loss = tf.add_n(parts) if parts else None
    if not isinstance(loss, (tf.Tensor, tf.Variable)) or loss.shape.num_elements() != 1:
        raise refusals.refuse(
            "the loss must be a scalar tf.Tensor",
            "option_value_invalid",
            "pass GradOptions(loss_fn=lambda output: tf.reduce_sum(output))",
        )
    return loss


class _ShadowSession:
    """Stands in for the capture session in the auxiliary forward: it hands out ids and remembers
    each op's signature and value, and sends nothing to the core."""

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


def check(options: Any) -> None:
    """Refuses foreign grad options before anything runs."""
    if not isinstance(options, GradOptions):
        raise refusals.option(
            "grad_options for the TensorFlow backend must be tl.backends.tf.GradOptions",
            "pass tl.backends.tf.GradOptions(loss_fn=...)",
        )


def derive(trace: Any, options: GradOptions) -> Autograd:
    """The derived gradients of a live trace (``CaptureOptions(grad_options=...)``)."""
    runtime = trace._runtime
    model, args, kwargs = runtime.model, runtime.args, runtime.kwargs
    captured = [op for op in trace.ops if op.kind in ("compute", "literal_producer")]
    floating_ops = [op for op in captured if op.dtype.startswith(("float", "bfloat"))]
    if options.intermediate_grads:
        check_intermediate_cap(len(floating_ops), options.max_intermediate_grads)
    params: List[Tuple[str, Any]] = [
        (f"params.{runtime.param_addresses[value_id]}", variable)
        for value_id, variable in runtime.params.items()
        if variable.trainable and variable.dtype.is_floating
    ]
    inputs = [
        (f"inputs.{index}", value)
        for index, value in enumerate(args)
        if isinstance(value, tf.Tensor) and _floating(value)
    ]
    shadow = _ShadowSession()
    with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        for _name, value in inputs:
            tape.watch(value)
        for _name, variable in params:
            tape.watch(variable)
        with Patches() as patches:
            recorder = Recorder(shadow)
            if is_module(model) and trace.options.module_identity_mode == "object_module":
                recorder.declare_modules(model)
            recorder.install(patches, model)
            output = model(*args, **kwargs)
        loss = _loss(options, output)
    adapter = trace._backend
    outputs = tensors_of(output)
    expected = [op.out for op in trace.outputs]
    if len(outputs) != len(expected) or not all(
        value is not None and values_match(adapter, got, value, op.dtype)
        for got, value, op in zip(outputs, expected, trace.outputs)
    ):
        raise CaptureError(
            "the auxiliary forward of the derived gradients does not reproduce the captured output",
            "derived_grad_replay_diverged",
            "make the forward deterministic (no Python-side state that changes between calls), "
            "then trace again",
        )
    targets = inputs + params
    grads = tape.gradient(loss, [value for _, value in targets]) if targets else []
    autograd = Autograd({name: grad for (name, _), grad in zip(targets, grads) if grad is not None})
    if options.intermediate_grads:
        _intermediate(captured, shadow, tape, loss, autograd)
    del tape
    return autograd


def _intermediate(
    captured: List[Any], shadow: _ShadowSession, tape: Any, loss: Any, autograd: Autograd
) -> None:
    signature = [(op.func_name, tuple(op.shape)) for op in captured]
    replayed = [(func, shape) for _, func, shape, _, _ in shadow.ops]
    if signature != replayed:
        mark_unavailable(
            autograd, INTERMEDIATE_REPLAY_DIVERGED, "the auxiliary forward ran a different graph"
        )
        return
    wanted = [
        (value_id, value) for value_id, _func, _shape, _parents, value in shadow.ops if _floating(value)
    ]
    grads = tape.gradient(loss, [value for _, value in wanted]) if wanted else []
    by_id: Dict[int, Any] = {value_id: grad for (value_id, _), grad in zip(wanted, grads)}
    exposed: Dict[str, Any] = {}
    for op, (value_id, _, _, _, _) in zip(captured, shadow.ops):
        grad = by_id.get(value_id)
        if grad is not None and op.dtype.startswith(("float", "bfloat")):
            exposed[op.label] = DerivedGrad(grad, "exact", ("structural_match", "tf_gradient_tape"))
    autograd.intermediate_derived_grads = exposed
